"""Redis connections: one sync client per process, one async client per loop."""
import asyncio
import threading

import redis
import redis.asyncio as aioredis
from django.conf import settings

_lock = threading.Lock()
_sync_client: redis.Redis | None = None
_async_clients: dict[int, aioredis.Redis] = {}

_COMMON = dict(decode_responses=True, socket_connect_timeout=3, health_check_interval=15)


def get_redis() -> redis.Redis:
    """The process-wide sync client (thread-safe connection pool)."""
    global _sync_client
    if _sync_client is None:
        with _lock:
            if _sync_client is None:
                _sync_client = redis.Redis.from_url(
                    settings.REDIS_URL, socket_timeout=30, retry_on_timeout=True, **_COMMON
                )
    return _sync_client


def database(client) -> int:
    """The database number `client` works in (what a pub/sub channel's name must carry)."""
    return int(client.connection_pool.connection_kwargs.get("db", 0))


def get_async_redis() -> aioredis.Redis:
    """An async client bound to the running event loop (clients cannot cross loops)."""
    loop = asyncio.get_running_loop()
    client = _async_clients.get(id(loop))
    if client is None:
        client = aioredis.Redis.from_url(settings.REDIS_URL, socket_timeout=None, **_COMMON)
        _async_clients[id(loop)] = client
    return client
