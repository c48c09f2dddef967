"""Stream lifetimes and the one way a terminal entry is written."""
from django.conf import settings

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs import events

# Append a terminal entry unless the stream already ends with one, then start
# the stream's TTL. KEYS[1] = stream, ARGV[1] = TTL seconds, ARGV[2..] = fields.
TERMINAL_SCRIPT = (
    "local e = redis.call('xrevrange', KEYS[1], '+', '-', 'COUNT', 1) "
    "if e[1] then for i = 1, #e[1][2], 2 do if e[1][2][i] == 'type' and "
    "(e[1][2][i+1] == 'done' or e[1][2][i+1] == 'error') then return 0 end end end "
    "redis.call('xadd', KEYS[1], '*', unpack(ARGV, 2)) redis.call('expire', KEYS[1], ARGV[1]) return 1"
)


def stream_ttl_seconds() -> int:
    return settings.CHATSITE["STREAM_TTL_SECONDS"]


def terminal_args(run_id: int, fields: dict) -> tuple:
    """EVAL arguments that append `fields` as the run's terminal entry."""
    flat = [str(x) for kv in fields.items() for x in kv]
    return (TERMINAL_SCRIPT, 1, redis_keys.run_stream(run_id), stream_ttl_seconds(), *flat)


def write_terminal(run_id: int, fields: dict) -> bool:
    """Append a terminal entry if the stream has none yet (atomic); True if written."""
    return bool(get_redis().eval(*terminal_args(run_id, fields)))


def stream_ended(run_id: int) -> bool:
    """Whether the run's stream holds its terminal entry (the last one, when there is one)."""
    for entry_id, fields in get_redis().xrevrange(redis_keys.run_stream(run_id), count=1):
        return events.decode(entry_id, fields).is_terminal
    return False
