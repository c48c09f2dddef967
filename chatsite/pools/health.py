"""Which workers serve a pool right now, from their heartbeats in Redis."""
import time

from chatsite import redis_keys
from chatsite.redis_client import get_redis

STALE_SECONDS = 3.0  # workers beat every second; three missed beats and a worker is gone


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
