"""Worker heartbeats: the engine's figures in Redis about once a second.

Routing, the admin and the metrics read them; the same beat keeps this
worker's run leases alive and notices a lease another attempt has taken."""
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


class Heartbeat:
    def __init__(self, runtime):
        self.rt = runtime
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)
        self._last_tokens = 0
        self._last_time = time.monotonic()
        self.leases: dict[int, str] = {}  # run id -> lease token, kept by the tasks
        self.leases_lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
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
        lost = lease.refresh(leases)
        if lost:
            log.error("lease lost for run(s) %s; stopping them here", sorted(lost))
            self.rt.writer.supersede(lost)

    def beat_quietly(self) -> None:
        try:
            self.beat()
        except Exception as exc:
            log.warning("heartbeat failed: %s", exc)

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_SECONDS):
            self.beat_quietly()
