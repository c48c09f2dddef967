"""Admission against the fleet: a pool with no live worker refuses at once (503),
unless it queues while a worker starts (scale from zero)."""
import time

from chatsite.errors import ModelUnavailable
from chatsite.counters import count_unavailable
from chatsite.pools.health import STALE_SECONDS, pool_has_live_worker
from chatsite.runs.models import GenerationRun

NO_WORKER_RETRY_SECONDS = 10  # a worker restarting beats again within seconds; a cold start takes longer
# A memo on the pool row object, so that admission and the run's representation in
# the same request share one Redis read; it holds for a second (rows can outlive a request).
_LIVE = "_live_worker_memo"
MEMO_SECONDS = 1.0


def _live(pool) -> bool:
    memo = getattr(pool, _LIVE, None)
    now = time.monotonic()
    if memo is None or now - memo[0] > MEMO_SECONDS:
        memo = (now, pool_has_live_worker(pool.name))
        setattr(pool, _LIVE, memo)
    return memo[1]


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
    No Redis read for a run past the queue, nor after admission already looked."""
    return run.status == GenerationRun.Status.QUEUED and not _live(run.pool)
