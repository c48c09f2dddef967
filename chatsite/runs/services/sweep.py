"""The beat sweep: runs whose worker vanished reconverge here."""
import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from chatsite import redis_keys
from chatsite.pools.health import live_workers
from chatsite.redis_client import get_redis
from chatsite.runs import fair_queue, queues
from chatsite.runs.dispatch import message, run_dispatch
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.claim import run_claim, run_release
from chatsite.runs.services.finalize import run_end, run_finalize
from chatsite.runs.stream import codec, lease, log

logger = logging.getLogger(__name__)

QUEUED_GRACE = timedelta(minutes=5)  # a queued run may legitimately wait this long
PINNED_GRACE = timedelta(seconds=15)  # ...unless it waits in the queue of a worker that is gone
# ...or waits in the fair queue with no message left to wake a worker for it (a live worker takes a
# wake-up within milliseconds: longer than this, the message was lost or a parked thread holds it).
UNWOKEN_GRACE = timedelta(seconds=5)
REDISPATCH_GUARD_SECONDS = 15


def runs_sweep() -> dict:
    """Finalize runs whose stream ended but whose worker died before saving; fail
    runs whose stream is broken (a gap in seq); dispatch again running runs no live
    attempt holds, and queued runs whose message was lost: past UNWOKEN_GRACE, the fair
    queue holds them and no message is left to wake a worker for them; past PINNED_GRACE,
    the fair queue does not hold them, or they wait for a pinned worker that is gone. One
    run that cannot be handled is logged and skipped: it never stops the sweep. Returns counts."""
    r = get_redis()
    now = timezone.now()
    lease_grace = timedelta(seconds=settings.CHATSITE["RUN_LEASE_SECONDS"])
    counts = {"finalized": 0, "failed": 0, "redispatched": 0, "errors": 0}
    running = GenerationRun.objects.filter(status=GenerationRun.Status.RUNNING, started_at__lt=now - lease_grace)
    queued = GenerationRun.objects.filter(status=GenerationRun.Status.QUEUED, queued_at__lt=now - UNWOKEN_GRACE)
    alive = live_workers()
    waiting = list(queued.select_related("pool")[:500])
    held = fair_queue.waiting(waiting) if fair_queue.enabled() else {}
    unwoken = _unwoken([run for run in waiting if held.get(run.pk)])
    # A queued run the fair queue does not hold has no wake-up to find it (its dispatch
    # failed with Redis, or the worker that popped it died before its claim).
    unrecorded = {pk for pk, is_held in held.items() if not is_held}
    pinned_grace = now - PINNED_GRACE
    stranded = [run for run in waiting if run.pk in unwoken or run.queued_at < now - QUEUED_GRACE or (
        run.queued_at < pinned_grace and (run.pk in unrecorded or _pinned_to_dead_worker(r, run, alive)))]
    candidates = list(running.select_related("pool")[:500]) + stranded
    states = lease.states([run.pk for run in candidates])
    for run in candidates:
        try:
            outcome = _sweep_one(r, run, states[run.pk])
        except Exception:
            logger.exception("sweep: run %s could not be handled; going on with the others", run.pk)
            outcome = "errors"
        if outcome:
            counts[outcome] += 1
    return counts


def run_reconverge(*, run_id: int) -> str | None:
    """The sweep's rule for one run, at once: for a worker that stopped a run because its
    own lease on it lapsed (it was paused, or cut off from Redis, past the lease). Nothing
    when a live attempt holds it now or it has ended; else finalized (its stream ended) or
    dispatched again (once per guard window, shared with the sweep): it goes on without
    waiting for the beat's next sweep. Returns the sweep's outcome, or None."""
    run = (GenerationRun.objects.select_related("pool")
           .filter(pk=run_id, status__in=GenerationRun.ACTIVE).first())
    if run is None:
        return None
    return _sweep_one(get_redis(), run, lease.states([run.pk])[run.pk])


def _sweep_one(r, run: GenerationRun, state: str | None) -> str | None:
    if lease.is_ended(state):  # its stream ended; its worker died before saving it
        return "finalized" if run_finalize(run_id=run.pk) is not None else None
    if state is not None:
        return None  # a live attempt holds it
    reply = log.read(run.pk)
    if reply.terminal is not None:
        return "finalized" if run_finalize(run_id=run.pk) is not None else None
    if reply.gap is not None:
        claim = run_claim(run_id=run.pk, worker="sweep")
        if claim is None:
            return None  # an attempt took it meanwhile; it ends the run the same way
        try:
            run_end(run_id=run.pk, lease_token=claim.lease_token,
                    fields=codec.error_fields(code=reply.gap.code, message=reply.gap.message))
        finally:
            run_release(run_id=run.pk, lease_token=claim.lease_token)
        return "failed"
    # One re-dispatch per attempt and guard window, however often the sweep runs.
    if r.set(redis_keys.run_redispatch_guard(run.pk, run.attempt), "1", nx=True, ex=REDISPATCH_GUARD_SECONDS):
        logger.warning("run %s (%s) has no live attempt; dispatching it again", run.pk, run.status)
        run_dispatch(run, affinity=False)  # its pinned worker is the one that died
        return "redispatched"
    return None


def _unwoken(runs: list[GenerationRun]) -> set[int]:
    """Of runs the fair queue holds, those whose pool queue has no message left to wake a
    worker for them: a wake-up was lost. A worker paused in its blocking pop takes the
    message off the broker's list, and dies before kombu records it as unacknowledged
    (then no visibility timeout brings it back). Dispatched again, such a run gets a new
    wake-up. A run its tenant's cap holds back, while parked threads hold the wake-ups,
    gets one more too: a thread that finds nothing to serve lets it go."""
    if not runs:
        return set()
    queue_of = {run.pk: queues.pool_queue(run.pool.name, run.tier) for run in runs}
    try:
        sizes = message.messages_waiting(set(queue_of.values()))
    except Exception:  # the broker away: the rest of the sweep goes on, and the next sweep looks again
        logger.exception("sweep: could not count the messages in the pool queues")
        return set()
    return {pk for pk, queue in queue_of.items() if not sizes[queue]}


def _pinned_to_dead_worker(r, run: GenerationRun, alive: dict) -> bool:
    worker = r.get(redis_keys.chat_affinity(run.chat_id))
    return bool(worker) and worker not in alive
