"""kombu's Redis transport, less one cost per broker operation.

kombu's Redis channel builds a new `redis.Redis` client (over the channel's connection
pool) for every operation that is not given one: the acknowledgement of each task, the
record of each unacknowledged delivery, and more. Building a client copies redis-py's
response-callback tables: 0.25 ms of CPU each, measured on this machine while a bench ran,
twice or more per run in a worker (bench.per_run's worker profile: `Channel._create_client`, 7.8% of the
worker's CPU per run). A client over a connection pool is safe to share between threads
(each command takes a connection from the pool, each pipeline is its own object), so
this channel keeps one per pool and builds a new one only when the channel's pool is
replaced (after a fork or a reconnection).

Used for redis://, rediss:// and unix:// broker URLs (workers/app.py); Sentinel and
other transports are kombu's own.
"""
from contextlib import contextmanager

from kombu.transport import redis as kombu_redis

SCHEMES = ("redis", "rediss", "unix")


class Channel(kombu_redis.Channel):
    _shared = None  # (the pool, the client over it)

    @contextmanager
    def conn_or_acquire(self, client=None):
        if client:
            yield client
            return
        pool, shared = self._shared or (None, None)
        if pool is not self.pool:
            shared = self._create_client()
            self._shared = (self.pool, shared)
        yield shared


class Transport(kombu_redis.Transport):
    Channel = Channel


def transport_for(broker_url: str) -> str | None:
    """The broker_transport setting for `broker_url`: this module's for Redis URLs, else
    None (the URL's own)."""
    return f"{__name__}:Transport" if broker_url.split("://", 1)[0] in SCHEMES else None
