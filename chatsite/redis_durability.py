"""Does the Redis holding run streams keep them across a restart?

Run streams live only in Redis until a run ends and Postgres gets the reply: a
Redis that persists nothing loses every stream in flight when it restarts (the
runs then fail with a gap, or restart). With AOF (appendonly yes, appendfsync
everysec, as scripts/services.sh starts it) a restart loses at most about a
second of entries; with RDB snapshots only, everything since the last one.

The web (chatsite/edge/asgi.py) and the workers (workers/bootstep.py) check at start
and warn in the log; /healthz and /metrics (`chatsite_redis_persistent`) say so.
"""
import logging
import time
from dataclasses import dataclass

import redis
from django.conf import settings

log = logging.getLogger(__name__)

CACHE_SECONDS = 60.0


@dataclass(frozen=True)
class Persistence:
    aof: bool | None  # None: could not tell (CONFIG and INFO both refused, or Redis down)
    rdb: bool | None
    detail: str

    @property
    def persistent(self) -> bool:
        return bool(self.aof or self.rdb)


def redis_persistence(client: redis.Redis | None = None) -> Persistence:
    """What the Redis at REDIS_URL (or `client`) persists: AOF, RDB snapshots, or nothing."""
    client = client or redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3, socket_timeout=3,
                                            decode_responses=True)
    try:
        config = {**client.config_get("appendonly"), **client.config_get("save"),
                  **client.config_get("appendfsync")}
    except redis.ResponseError:  # CONFIG renamed away (managed Redis): INFO still tells about AOF
        try:
            info = client.info("persistence")
        except redis.RedisError as exc:
            return Persistence(None, None, f"could not ask Redis: {exc}")
        aof = bool(int(info.get("aof_enabled", 0)))
        return Persistence(aof, None, "AOF on" if aof else "AOF off; RDB snapshots unknown (CONFIG refused)")
    except redis.RedisError as exc:
        return Persistence(None, None, f"could not ask Redis: {exc}")
    aof = config.get("appendonly") == "yes"
    rdb = bool(config.get("save", "").strip())
    parts = [f"AOF on (appendfsync {config.get('appendfsync')})" if aof else "AOF off",
             f"RDB snapshots ({config['save']})" if rdb else "no RDB snapshots"]
    return Persistence(aof, rdb, ", ".join(parts))


def check_at_start(role: str) -> Persistence:
    """Log whether run streams survive a Redis restart; a warning if they do not."""
    state = redis_persistence()
    _remember(state)
    if state.persistent:
        log.info("%s: the Redis holding run streams persists them: %s", role, state.detail)
    else:
        log.warning("%s: the Redis holding run streams does not persist them (%s): a Redis restart loses every "
                    "stream in flight. Start it with --appendonly yes --appendfsync everysec "
                    "(scripts/services.sh does).", role, state.detail)
    return state


_cached: tuple[float, Persistence] | None = None


def _remember(state: Persistence) -> None:
    global _cached
    _cached = (time.monotonic(), state)


def cached_persistence() -> Persistence:
    """redis_persistence(), asked at most once a minute per process (for /healthz)."""
    if _cached is None or time.monotonic() - _cached[0] > CACHE_SECONDS:
        _remember(redis_persistence())
    return _cached[1]
