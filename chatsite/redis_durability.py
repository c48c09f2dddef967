"""Does the Redis holding run streams keep them across a restart?

Run streams live only in Redis until a run ends and Postgres gets the reply: a
Redis that persists nothing loses every stream in flight when it restarts (the
runs then fail with a gap, or restart). With AOF (appendonly yes, appendfsync
everysec, as scripts/services.sh starts it) a restart loses at most about a
second of entries; with RDB snapshots only, everything since the last one.

The web (chatsite/edge/asgi.py) and the workers (workers/bootstep.py) check at start and
refuse to start against a Redis that persists nothing, unless the operator accepts losing
the streams in flight by name: CHATSITE_ALLOW_VOLATILE_REDIS=1 (then a warning in the log).
/healthz and /metrics (`chatsite_redis_persistent`) say which it is.
"""
import logging
import time
from dataclasses import dataclass

import redis
from django.conf import settings

log = logging.getLogger(__name__)

CACHE_SECONDS = 60.0
ALLOW_VOLATILE = "CHATSITE_ALLOW_VOLATILE_REDIS"  # the environment variable behind settings.ALLOW_VOLATILE_REDIS


class VolatileRedis(RuntimeError):
    """The Redis holding run streams would lose them in a restart, and no one accepted that."""


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
    """Log whether run streams survive a Redis restart. Raises VolatileRedis when they would
    not (or Redis could not tell) and CHATSITE_ALLOW_VOLATILE_REDIS does not accept it."""
    state = redis_persistence()
    _remember(state)
    if state.persistent:
        log.info("%s: the Redis holding run streams persists them: %s", role, state.detail)
        return state
    risk = (f"the Redis holding run streams does not persist them ({state.detail}): a Redis restart loses "
            "every stream in flight. Start it with --appendonly yes --appendfsync everysec (make run and "
            "scripts/services.sh do)")
    if settings.ALLOW_VOLATILE_REDIS:
        log.warning("%s: %s; running anyway, as %s=1 allows.", role, risk, ALLOW_VOLATILE)
        return state
    message = f"{role}: refusing to start: {risk}, or set {ALLOW_VOLATILE}=1 to accept the loss."
    log.critical(message)
    raise VolatileRedis(message)


_cached: tuple[float, Persistence] | None = None


def _remember(state: Persistence) -> None:
    global _cached
    _cached = (time.monotonic(), state)


def cached_persistence() -> Persistence:
    """redis_persistence(), asked at most once a minute per process (for /healthz)."""
    if _cached is None or time.monotonic() - _cached[0] > CACHE_SECONDS:
        _remember(redis_persistence())
    return _cached[1]
