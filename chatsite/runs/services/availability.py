"""Admission against the fleet: a pool with no live worker refuses at once (503),
unless it queues while a worker starts (scale from zero)."""
import time

from chatsite.errors import ModelUnavailable
from chatsite.counters import count_unavailable
from chatsite.pools.health import STALE_SECONDS, pool_has_live_worker
from chatsite.runs.models import GenerationRun

NO_WORKER_RETRY_SECONDS = 10  # a worker restarting beats again within seconds; a cold start takes longer
# The pools this process last saw a live worker of, and when (monotonic): one Redis read a MEMO_SECONDS
# per pool, not one per admission. Only "live" is kept: a pool seen without one is asked again next time
# (the rare path), so a worker that just started counts at once; one whose last worker stopped is
# believed live for at most a second more (its runs then wait in the queue, as they would have).
MEMO_SECONDS = 1.0
_seen_live: dict[str, float] = {}


def _live(pool) -> bool:
    now = time.monotonic()
    seen = _seen_live.get(pool.name)
    if seen is not None and now - seen < MEMO_SECONDS:
        return True
    if pool_has_live_worker(pool.name):
        _seen_live[pool.name] = now
        return True
    _seen_live.pop(pool.name, None)
    return False


def forget_memos() -> None:
    """Forget the pools seen live (tests that stop a pool's workers)."""
    _seen_live.clear()


def refuse_if_no_worker(pool) -> None:
    """Raise ModelUnavailable (503 model_unavailable + Retry-After) when no worker of
    the pool has sent a heartbeat for STALE_SECONDS, unless the pool is marked
    `queue_when_cold`. At most one Redis read (none for a pool that queues when cold)."""
    if pool.queue_when_cold or _live(pool):
        return
    count_unavailable(pool.name)
    raise ModelUnavailable(
        f"model {pool.name!r} has no worker running right now (none has reported for {STALE_SECONDS:.0f} s); "
        f"nothing was saved: try again in a little while or pick another model",
        retry_after=NO_WORKER_RETRY_SECONDS)


def run_waiting_for_worker(run: GenerationRun) -> bool:
    """Whether a queued run waits for its pool's first worker (none is live yet).
    No Redis read for a run past the queue, nor within MEMO_SECONDS of a look that found one."""
    return run.status == GenerationRun.Status.QUEUED and not _live(run.pool)
