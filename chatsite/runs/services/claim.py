"""The claim: one live attempt per run, ever.

A Redis lease (SET NX with a TTL the worker keeps refreshing) says an attempt is
alive; the Postgres compare-and-set then moves the run to `running` and bumps
its attempt. A redelivered task whose run is terminal, or whose run another live
attempt holds, does nothing.
"""
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs.models import GenerationRun

# The compare-and-set in one statement (one round trip): a terminal run is left alone.
_CLAIM = (f'UPDATE "{GenerationRun._meta.db_table}" SET status = %s, attempt = attempt + 1, worker = %s, '
          f'started_at = COALESCE(started_at, %s) WHERE id = %s AND NOT (status = ANY(%s)) RETURNING *')
# Delete the lease only if it is still ours.
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
# Extend the lease if it is ours, or take it back if it lapsed (e.g. Redis restarted).
_REFRESH = ("local v = redis.call('get', KEYS[1]) "
            "if v == ARGV[1] or not v then redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end return 0")


@dataclass(frozen=True)
class Claim:
    run: GenerationRun
    lease_token: str


def _lease_ms() -> int:
    return int(settings.CHATSITE["RUN_LEASE_SECONDS"] * 1000)


def run_claim(*, run_id: int, worker: str) -> Claim | None:
    """Take the run for a new attempt, or None if it is finished or held by a live attempt."""
    token = f"{worker}:{uuid.uuid4().hex}"
    key = redis_keys.run_lease(run_id)
    if not get_redis().set(key, token, nx=True, px=_lease_ms()):
        return None
    try:
        run = next(iter(GenerationRun.objects.raw(
            _CLAIM, [GenerationRun.Status.RUNNING, worker, timezone.now(), run_id, list(GenerationRun.TERMINAL)])), None)
    except BaseException:
        run_release(run_id=run_id, lease_token=token)
        raise
    if run is None:  # finished, or no such run
        run_release(run_id=run_id, lease_token=token)
        return None
    return Claim(run=run, lease_token=token)


def run_release(*, run_id: int, lease_token: str) -> None:
    get_redis().eval(_RELEASE, 1, redis_keys.run_lease(run_id), lease_token)


def leases_refresh(leases: dict[int, str]) -> set[int]:
    """Extend this worker's leases in one round trip; returns the runs whose lease
    another attempt now holds (this worker must stop generating them)."""
    if not leases:
        return set()
    pipe = get_redis().pipeline(transaction=False)
    for run_id, token in leases.items():
        pipe.eval(_REFRESH, 1, redis_keys.run_lease(run_id), token, _lease_ms())
    return {run_id for run_id, ok in zip(leases, pipe.execute()) if not ok}


def lease_holder(run_id: int) -> str | None:
    return get_redis().get(redis_keys.run_lease(run_id))
