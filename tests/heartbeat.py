"""A worker's heartbeat written by hand: what workers/heartbeat.py writes each second,
for tests that need a pool to have (or not have) a live worker without starting one."""
import time

from chatsite import redis_keys
from chatsite.pools.health import pool_index_beat, pool_index_leave
from chatsite.redis_client import get_redis


def beat(worker: str, pool: str, *, ready: bool = True, draining: bool = False, age: float = 0.0,
         pool_index: bool = True, **figures) -> None:
    """One heartbeat of `worker`, `age` seconds old. `pool_index=False`: a heartbeat that
    writes only the global index and the hash (workers of the release before the pool index)."""
    ts = time.time() - age
    fields = {"pool": pool, "ready": int(ready), "draining": int(draining), "running": 0, "waiting": 0,
              "kv_cache_usage": 0.0, "tokens_per_second": 0.0, "prefix_cache_hit_rate": 0.0, "ts": ts, **figures}
    pipe = get_redis().pipeline(transaction=False)
    pipe.hset(redis_keys.worker_heartbeat(worker), mapping=fields)
    pipe.expire(redis_keys.worker_heartbeat(worker), 10)
    pipe.zadd(redis_keys.workers_index(), {worker: ts})
    if pool_index:
        pool_index_beat(pipe, pool=pool, worker=worker, ts=ts, draining=draining)
    pipe.execute()


def gone(worker: str, pool: str) -> None:
    """The worker stopped: what the heartbeat's stop() removes."""
    pipe = get_redis().pipeline(transaction=False)
    pipe.delete(redis_keys.worker_heartbeat(worker))
    pipe.zrem(redis_keys.workers_index(), worker)
    pool_index_leave(pipe, pool=pool, worker=worker)
    pipe.execute()
