"""A wake-up from a pool queue: serve the fair next run of this worker's pool and the
message's tier (chatsite.runs.fair_queue), not necessarily the run the message names."""
import logging

from chatsite.runs import fair_queue
from chatsite.runs.services import run_claim
from workers.db_retry import with_db_retry
from workers.generation import finish_unclaimed, generate, generate_claimed
from workers.runtime import Runtime

log = logging.getLogger(__name__)

# Finished or held runs a wake-up may pop (and drop) before it gives up; the rest wait for later wake-ups.
MAX_SKIPS = 50


def generate_next(rt: Runtime, *, tier: str, woken_by: int) -> str:
    """Pop runs of (pool, tier) in fair order until one is claimed, and generate it. A
    popped run that is finished (a cancel) or held by a live attempt (a re-dispatched
    duplicate) is skipped. With nothing left to pop, the message's own run is tried:
    it may never have been recorded, and the claim skips it when it is done or held."""
    pool = rt.pool.name
    for _ in range(MAX_SKIPS):
        picked = fair_queue.pop(pool=pool, tier=tier)
        if picked is None:
            break
        try:
            claim = with_db_retry(run_claim, run_id=picked.run_id, worker=rt.worker_name)
        except BaseException:
            _put_back(pool, tier, picked)
            raise
        if claim is not None:
            return generate_claimed(rt, claim)
        finish_unclaimed(picked.run_id)
    return generate(rt, woken_by)


def _put_back(pool: str, tier: str, picked: fair_queue.Picked) -> None:
    """The claim failed (Postgres or Redis away): the run waits again, first of its tenant's."""
    try:
        fair_queue.push(pool=pool, tier=tier, tenant_id=picked.tenant_id, run_id=picked.run_id)
    except Exception:
        log.exception("run %s: could not put it back in the fair queue; the sweep re-sends it", picked.run_id)
