"""Worker heartbeats: the engine's figures in Redis about once a second.

Routing, the admin and the metrics read them; the same beat keeps this
worker's run leases alive and notices a lease another attempt has taken. A second
thread stops a run whose lease is about to lapse by this worker's own clock, without
asking Redis: a worker cut off from Redis stops its engine for a run before another
worker can take it over, instead of generating it to the end for nobody."""
import logging
import threading
import time

from django.conf import settings

from chatsite import redis_keys
from chatsite.pools.health import pool_index_beat, pool_index_leave
from chatsite.redis_client import get_redis
from chatsite.runs.stream import lease

log = logging.getLogger(__name__)

# About once a second; never slower than health.STALE_SECONDS allows (three missed beats = gone).
INTERVAL_SECONDS = settings.CHATSITE["HEARTBEAT_SECONDS"]
TTL_SECONDS = 10
LEASE_WATCH_SECONDS = 0.25
# A run is stopped this long before its lease can lapse in Redis, so that it is stopped
# before another attempt can take it over, even if the watch wakes up late (a loaded
# machine). With the tests' 4 s lease that is after 3 s without an extension: three missed
# beats, when routing counts the worker as gone anyway (health.STALE_SECONDS).
LEASE_MARGIN_SECONDS = 1.0


def stop_after_seconds() -> float:
    """How long a run may go without a lease extension reaching Redis: the lease less
    LEASE_MARGIN_SECONDS, and half a lease at least."""
    seconds = lease.lease_ms() / 1000
    return max(seconds - LEASE_MARGIN_SECONDS, seconds / 2)


class Heartbeat:
    def __init__(self, runtime):
        self.rt = runtime
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)
        self._watch = threading.Thread(target=self._watch_loop, name="lease-watch", daemon=True)
        self._last_tokens = 0
        self._last_time = time.monotonic()
        self.leases: dict[int, str] = {}  # run id -> lease token, kept by the tasks
        # run id -> when (monotonic) the last extension that went through was sent, or the claim began
        self._extended_at: dict[int, float] = {}
        self.leases_lock = threading.Lock()
        self._dropped = threading.Condition(self.leases_lock)  # notified as a run's lease is dropped

    def start(self) -> None:
        self._thread.start()
        self._watch.start()

    def hold(self, run_id: int, token: str, *, since: float) -> None:
        """Keep this run's lease alive; `since`: a monotonic time no later than the lease
        was taken (its TTL started then or after)."""
        with self.leases_lock:
            self.leases[run_id] = token
            self._extended_at[run_id] = since

    def drop(self, run_id: int) -> None:
        with self.leases_lock:
            self.leases.pop(run_id, None)
            self._extended_at.pop(run_id, None)
            self._dropped.notify_all()

    def wait_dropped(self, run_id: int, *, timeout: float) -> bool:
        """Whether this worker holds `run_id`'s lease no more (its task is over: ended and
        saved, or given up) within `timeout` seconds; True at once for a run it does not hold."""
        with self.leases_lock:
            return self._dropped.wait_for(lambda: run_id not in self.leases, timeout=timeout)

    def holding(self) -> bool:
        """Whether this worker holds any run's lease (claimed, not yet released)."""
        with self.leases_lock:
            return bool(self.leases)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._watch.join(5)
        try:
            pipe = get_redis().pipeline(transaction=False)
            pipe.delete(redis_keys.worker_heartbeat(self.rt.worker_name))
            pipe.zrem(redis_keys.workers_index(), self.rt.worker_name)
            pool_index_leave(pipe, pool=self.rt.pool.name, worker=self.rt.worker_name)
            pipe.execute()
        except Exception:
            log.warning("could not remove the heartbeat of %s", self.rt.worker_name)

    def figures(self) -> dict:
        stats = self.rt.host.stats()
        now = time.monotonic()
        rate = (stats.generated_tokens - self._last_tokens) / max(now - self._last_time, 1e-6)
        self._last_tokens, self._last_time = stats.generated_tokens, now
        return {
            "pool": self.rt.pool.name, "ready": int(stats.ready), "draining": int(self.rt.draining),
            "disabled": int(self.rt.disabled),
            "running": stats.running, "waiting": stats.waiting, "active_runs": self.rt.host.num_active,
            "slots": settings.CHATSITE["WORKER_SLOTS"],
            "kv_cache_usage": round(stats.kv_cache_usage, 4),
            "prefix_cache_hit_rate": round(stats.prefix_cache_hit_rate, 4),
            "prefix_cache_queries": stats.prefix_cache_queries, "prefix_cache_hits": stats.prefix_cache_hits,
            "tokens_per_second": round(rate, 1), "generated_tokens": stats.generated_tokens, "ts": time.time(),
        }

    def beat(self) -> None:
        figures = self.figures()
        key = redis_keys.worker_heartbeat(self.rt.worker_name)
        pipe = get_redis().pipeline(transaction=False)
        pipe.hset(key, mapping=figures)
        pipe.expire(key, TTL_SECONDS)
        pipe.zadd(redis_keys.workers_index(), {self.rt.worker_name: figures["ts"]})
        pool_index_beat(pipe, pool=self.rt.pool.name, worker=self.rt.worker_name, ts=figures["ts"],
                        draining=self.rt.draining)
        pipe.execute()
        with self.leases_lock:
            leases = dict(self.leases)
        sent_at = time.monotonic()
        lost = lease.refresh(leases)
        with self.leases_lock:
            for run_id in leases.keys() - lost:
                if run_id in self._extended_at:  # not stopped as lapsed meanwhile
                    self._extended_at[run_id] = sent_at
        if lost:
            log.error("lease lost for run(s) %s; stopping them here", sorted(lost))
            self.rt.writer.supersede(lost)

    def beat_quietly(self) -> None:
        try:
            self.beat()
        except Exception as exc:
            log.warning("heartbeat failed: %s", exc)

    def stop_lapsed(self, now: float | None = None) -> set[int]:
        """Stop the runs whose lease is about to lapse: no extension went through for
        `stop_after_seconds()`, so Redis lets the lease go within LEASE_MARGIN_SECONDS (its
        TTL started no earlier than the extension was sent). Stopping one a little early
        only hands it over sooner; stopping it late would let two engines run it."""
        now = time.monotonic() if now is None else now
        limit = stop_after_seconds()
        with self.leases_lock:
            lapsed = {run_id for run_id, at in self._extended_at.items() if now - at > limit}
            for run_id in lapsed:
                del self._extended_at[run_id]  # stopped once
        if lapsed:
            log.error("lease of run(s) %s lapsing (no extension reached Redis for %.1f s); stopping them here",
                      sorted(lapsed), limit)
            self.rt.writer.supersede(lapsed)
        return lapsed

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_SECONDS):
            self.beat_quietly()

    def _watch_loop(self) -> None:
        while not self._stop.wait(LEASE_WATCH_SECONDS):
            try:
                self.stop_lapsed()
            except Exception:
                log.exception("lease watch failed")
