"""A wake-up from a pool queue: serve the fair next run of this worker's pool and the
message's tier (chatsite.runs.fair_queue), not necessarily the run the message names.

A worker runs WORKER_SLOTS + WORKER_RESERVE_SLOTS threads, and no tenant holds more than
WORKER_SLOTS of its runs at once, fair-picked or sent to the worker's own queue (a chat's
next turn, a completion's n choices pinned together: each choice counts as a run): a
tenant that fills the slots alone keeps the throughput it had, and the reserve threads
wait (blocked on the fair queue's bell) for another tenant's run, which then starts at
once instead of after one of the first tenant's ends.
"""
import logging
import threading
from collections import Counter

from celery.exceptions import Reject
from django.conf import settings

from chatsite import stage_trace
from chatsite.runs import fair_queue
from chatsite.runs.dispatch import run_requeue
from chatsite.runs.models import GenerationRun
from workers.generation import claim_timed, finish_unclaimed, generate, generate_claimed
from workers.runtime import Runtime

log = logging.getLogger(__name__)

# Finished or held runs a wake-up may pop (and drop) before it gives up; the rest wait for later wake-ups.
MAX_SKIPS = 50
# A reserve thread wakes when a run is recorded, and at least this often (a place under a cap frees
# when one of this worker's runs ends, which rings no bell).
PARK_SECONDS = 0.25


class _Held:
    """Fair-picked runs this worker process is serving, per tenant (one engine per process)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.runs: Counter = Counter()

    def pick(self, pool: str, tier: str, cap: int):
        """Pop the fair next run of a tenant under `cap`, counting it as held."""
        with self.lock:
            capped = [str(tenant) for tenant, n in self.runs.items() if n >= cap]
            picked = fair_queue.pop(pool=pool, tier=tier, skip=capped)
            if isinstance(picked, fair_queue.Picked):
                self.runs[picked.tenant_id] += 1
            return picked

    def take(self, tenant_id: int, cap: int) -> bool:
        """Count a run of `tenant_id` as held, unless the tenant holds `cap` already."""
        with self.lock:
            if self.runs[tenant_id] >= cap:
                return False
            self.runs[tenant_id] += 1
            return True

    def release(self, tenant_id: int) -> None:
        with self.lock:
            self.runs[tenant_id] -= 1
            if self.runs[tenant_id] <= 0:
                del self.runs[tenant_id]


held = _Held()


def tenant_cap() -> int:
    """The most fair-picked runs one tenant holds on a worker at once."""
    return settings.CHATSITE["WORKER_SLOTS"]


def generate_next(rt: Runtime, *, tier: str, woken_by: int) -> str:
    """Pop runs of (pool, tier) in fair order until one is claimed, and generate it. A
    popped run that is finished (a cancel) or held by a live attempt (a re-dispatched
    duplicate) is skipped. While only tenants at their cap have runs waiting this thread
    is a reserve one: it waits for another tenant's run (or a free place under a cap).
    With nothing left to pop, the message's own run is tried: it may never have been
    recorded, and the claim skips it when it is done or held."""
    pool, skips = rt.pool.name, 0
    while skips < MAX_SKIPS:
        if rt.draining:  # a parked thread of a draining worker must not pop the runs it just handed over
            raise Reject("this worker is draining", requeue=True)
        picked = held.pick(pool, tier, tenant_cap())
        stage_trace.mark("worker.picked")
        if picked is None:
            break
        if picked == fair_queue.WAIT:
            fair_queue.wait_for_push(pool=pool, tier=tier, timeout=PARK_SECONDS)
            continue
        try:
            outcome = _serve(rt, tier, picked)
        finally:
            held.release(picked.tenant_id)
        if outcome is not None:
            return outcome
        skips += 1
    return generate(rt, woken_by)


def generate_pinned(rt: Runtime, *, run_id: int, tenant_id: int) -> str:
    """A run sent to this worker's own queue: generated here in its tenant's share of the
    worker's threads; past that share it goes to the pool's fair queue instead (where it
    waits its tenant's turn), so the reserve threads stay free for other tenants."""
    if not held.take(tenant_id, tenant_cap()):
        run_requeue(run_id=run_id, pool=rt.pool.name, tier=GenerationRun.Tier.INTERACTIVE, tenant_id=tenant_id)
        return "requeued"
    try:
        return generate(rt, run_id)
    finally:
        held.release(tenant_id)


def _serve(rt: Runtime, tier: str, picked: fair_queue.Picked) -> str | None:
    """Claim and generate a popped run; None when it is finished or held (skipped)."""
    try:
        claim, since = claim_timed(rt, picked.run_id)
    except BaseException:
        _put_back(rt.pool.name, tier, picked)
        raise
    if claim is None:
        finish_unclaimed(picked.run_id)
        return None
    return generate_claimed(rt, claim, since=since)


def _put_back(pool: str, tier: str, picked: fair_queue.Picked) -> None:
    """The claim failed (Postgres or Redis away): the run waits again, first of its tenant's."""
    try:
        fair_queue.push(pool=pool, tier=tier, tenant_id=picked.tenant_id, run_id=picked.run_id)
    except Exception:
        log.exception("run %s: could not put it back in the fair queue; the sweep re-sends it", picked.run_id)
