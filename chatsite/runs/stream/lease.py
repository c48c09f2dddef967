"""The lease: which attempt may write a run's stream.

One key per run holds the token of the attempt generating it (a fresh token per
attempt: `holder:uuid`), with a TTL its worker's heartbeat keeps extending. Every
write to the stream checks it (chatsite.runs.stream.log), so an attempt that lost
the lease (paused, partitioned, superseded) can write nothing. Releasing or
extending compares the token: a stale attempt never touches the live one's lease.
The terminal write replaces the token with `ended:<token>`, so nothing is ever
written after the terminal entry and no attempt can claim a finished run.
"""
import uuid

from django.conf import settings

from chatsite import redis_keys
from chatsite.redis_client import get_redis

ENDED_PREFIX = "ended:"

# Delete the lease only if it is still ours.
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
# Extend the lease only if it is still ours: a lapsed lease is never taken back (another
# attempt may hold the run by now; if none does, the sweep dispatches it again).
# An attempt that just wrote its run's end still holds it (it is saving the reply).
_REFRESH = ("local v = redis.call('get', KEYS[1]) "
            "if v == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end "
            "if v == 'ended:' .. ARGV[1] then return 1 end return 0")


def is_ended(value: str | None) -> bool:
    """Whether a lease value says the run's terminal entry has been written."""
    return value is not None and value.startswith(ENDED_PREFIX)


def lease_ms() -> int:
    return int(settings.CHATSITE["RUN_LEASE_SECONDS"] * 1000)


def acquire(run_id: int, holder: str) -> str | None:
    """A new attempt's token if nobody holds the run (and it has not ended), else None."""
    pipe = get_redis().pipeline(transaction=False)
    token = acquire_in(pipe, run_id, holder)
    return token if pipe.execute()[0] else None


def acquire_in(pipe, run_id: int, holder: str) -> str:
    """Queue acquire's SET on the caller's pipeline (one round trip with the caller's
    reads): the token returned is the attempt's if that SET's answer is true."""
    token = f"{holder}:{uuid.uuid4().hex}"
    pipe.set(redis_keys.run_lease(run_id), token, nx=True, px=lease_ms())
    return token


def release(run_id: int, token: str) -> None:
    get_redis().eval(_RELEASE, 1, redis_keys.run_lease(run_id), token)


def refresh(leases: dict[int, str]) -> set[int]:
    """Extend these leases in one round trip; returns the runs whose lease is no
    longer the given token (lapsed, taken by another attempt, or ended)."""
    if not leases:
        return set()
    pipe = get_redis().pipeline(transaction=False)
    ms = lease_ms()
    for run_id, token in leases.items():
        pipe.eval(_REFRESH, 1, redis_keys.run_lease(run_id), token, ms)
    return {run_id for run_id, ok in zip(leases, pipe.execute()) if not ok}


def states(run_ids: list[int]) -> dict[int, str | None]:
    """Each run's lease value in one round trip: None (no live attempt), an ended marker
    (see is_ended), or a live attempt's token."""
    if not run_ids:
        return {}
    values = get_redis().mget([redis_keys.run_lease(r) for r in run_ids])
    return dict(zip(run_ids, values))
