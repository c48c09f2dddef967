"""The `chatsite_redis_persistent` gauge: 1 when the Redis holding run streams persists them."""
from collections.abc import Iterator

from chatsite.redis_durability import redis_persistence


def persistence_lines() -> Iterator[str]:
    state = redis_persistence()
    yield "# HELP chatsite_redis_persistent 1 if the Redis holding run streams persists them (AOF or RDB), else 0"
    yield "# TYPE chatsite_redis_persistent gauge"
    yield f"chatsite_redis_persistent {1 if state.persistent else 0}"
