"""Which workers serve a pool right now, from their heartbeats in Redis.

Two indexes, both sorted sets scored by the heartbeat's time: every worker in
`workers_index()` (its figures in `worker_heartbeat(name)`), and, per pool, the
workers taking work in `pool_workers_index(pool)`, so that admission answers
"does pool P have a live worker" with one ZCOUNT."""
import time

from chatsite import redis_keys
from chatsite.redis_client import get_redis

STALE_SECONDS = 3.0  # workers beat every second; three missed beats and a worker is gone
POOL_INDEX_KEEP_SECONDS = 3600  # a beat prunes members silent this long (workers that died)
POOL_INDEX_TTL_SECONDS = 24 * 3600  # a pool nobody serves any more leaves no key behind


def live_workers() -> dict[str, dict]:
    """Worker name -> its latest heartbeat, for workers heard from in the last few seconds."""
    r = get_redis()
    names = r.zrangebyscore(redis_keys.workers_index(), time.time() - STALE_SECONDS, "+inf")
    if not names:
        return {}
    pipe = r.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(redis_keys.worker_heartbeat(name))
    return {name: beat for name, beat in zip(names, pipe.execute()) if beat}


def pool_workers(pool: str, workers: dict[str, dict] | None = None) -> dict[str, dict]:
    workers = live_workers() if workers is None else workers
    return {n: b for n, b in workers.items() if b.get("pool") == pool}


def pool_is_up(pool: str, workers: dict[str, dict] | None = None) -> bool:
    """A ready, non-draining worker serves the pool."""
    return any(b.get("ready") == "1" and b.get("draining") != "1" for b in pool_workers(pool, workers).values())


def pool_slots(pool: str) -> int:
    """The run slots of the pool's workers that take work now (ready, not draining,
    not waiting for a disabled pool), from their heartbeats: two round trips."""
    return sum(int(b.get("slots") or 0) for b in pool_workers(pool).values()
               if b.get("ready") == "1" and b.get("draining") != "1" and b.get("disabled") != "1")


def pool_index_beat(pipe, *, pool: str, worker: str, ts: float, draining: bool) -> None:
    """For the heartbeat: add to its pipeline (one round trip with the rest of the
    beat) the writes that keep `worker` in its pool's index while it takes work.
    A draining worker leaves the index at once, though it goes on beating."""
    key = redis_keys.pool_workers_index(pool)
    if draining:
        pipe.zrem(key, worker)
    else:
        pipe.zadd(key, {worker: ts})
    pipe.zremrangebyscore(key, "-inf", ts - POOL_INDEX_KEEP_SECONDS)
    pipe.expire(key, POOL_INDEX_TTL_SECONDS)


def pool_index_leave(pipe, *, pool: str, worker: str) -> None:
    """For the heartbeat's stop: take `worker` out of its pool's index."""
    pipe.zrem(redis_keys.pool_workers_index(pool), worker)


def pool_has_live_worker(pool: str) -> bool:
    """Whether a worker of `pool` that takes work (loading its engine or ready, not
    draining) has beaten in the last STALE_SECONDS. One ZCOUNT on the pool's index.

    When that finds none, the global index is asked too (two more round trips, only
    on this path): workers whose heartbeat does not write the pool index yet (a fleet
    in the middle of a rolling upgrade) still count."""
    key = redis_keys.pool_workers_index(pool)
    if get_redis().zcount(key, time.time() - STALE_SECONDS, "+inf") > 0:
        return True
    return any(b.get("draining") != "1" for b in pool_workers(pool).values())
