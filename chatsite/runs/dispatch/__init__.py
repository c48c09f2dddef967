"""Handing a committed run to Celery (its message: dispatch.message)."""
import logging

from chatsite import stage_trace
from chatsite.runs import fair_queue, queues
from chatsite.runs.dispatch import message
from chatsite.runs.models import GenerationRun
from chatsite.runs.routing import choices_pin, queue_for

log = logging.getLogger(__name__)


def run_dispatch(run: GenerationRun, *, affinity: bool = True, pinned: bool = True,
                 builds_on: int | None = None) -> None:
    """Send the generation task. Called after commit, so a worker never sees a run
    that is not in Postgres. If the broker is down the run stays queued and the
    beat sweep dispatches it again. `affinity=False` skips the pinned worker (the
    sweep re-dispatching a run whose worker died).

    A run for a pool queue is first recorded in the fair queue (chatsite.runs.fair_queue):
    its message is then a wake-up for the fair next run of its (pool, tier). A run pinned
    to a worker (a chat's next turn, its prefix cached there) is served by its message
    directly, as is one the fair queue could not record (Redis failing for a moment); its
    message names its tenant, so that the worker counts it in the tenant's share of its
    threads (workers.fair_pick). `pinned=False`: the run's chat cannot be pinned to any
    worker (a chat its admission made), so the router need not ask. `builds_on`: the reply
    the run's prompt starts with (the router looks for the worker holding its kept ids)."""
    pool_queue = queues.pool_queue(run.pool.name, run.tier)
    queue = queue_for(run, pinned=pinned, builds_on=builds_on) if affinity else pool_queue
    kwargs = {"tenant": run.tenant_id} if queue != pool_queue else {}
    if queue == pool_queue and fair_queue.enabled():
        tier = str(run.tier)
        try:
            if message.same_redis():  # the record and its wake-up in one atomic step
                fair_queue.push(pool=run.pool.name, tier=run.tier, tenant_id=run.tenant_id, run_id=run.pk,
                                wake=message.generate_message(queue, run.pk, {"tier": tier}))
                return
            fair_queue.push(pool=run.pool.name, tier=run.tier, tenant_id=run.tenant_id, run_id=run.pk)
            kwargs = {"tier": tier}
        except Exception:
            log.exception("run %s: the fair queue did not record it; its message serves it directly", run.pk)
    try:
        message.send_generate(queue, run.pk, kwargs)
    except Exception:
        log.exception("run %s: dispatch to %s failed; the sweep will retry", run.pk, queue)
        if kwargs:  # no wake-up was sent for it: it must not take another run's
            _forget(run)


def run_dispatch_choices(runs: list[GenerationRun], *, pinned: bool = True, builds_on: int | None = None) -> None:
    """Send the generation tasks of one turn's runs (one, or a completion's choices,
    the first first). Several are first pinned to one worker where one can take them
    all (routing.choices_pin), so its prefix cache computes their prompt once; one goes
    where the kept ids of reply `builds_on` (the reply its prompt starts with) are held.
    `pinned=False`: a single run whose chat no worker can hold (run_dispatch)."""
    stage_trace.mark("web.committed", runs[0].pk)
    if len(runs) > 1:
        try:
            choices_pin(runs[0], len(runs))
        except Exception:
            log.exception("run %s: could not pin its choices to one worker; they go to the pool", runs[0].pk)
        builds_on = None  # the choices stay together, on the worker choices_pin chose
    for run in runs:
        run_dispatch(run, pinned=pinned, builds_on=builds_on)
    stage_trace.mark("web.dispatched", runs[0].pk)


def run_requeue(*, run_id: int, pool: str, tier: str, tenant_id: int) -> None:
    """A run sent to a worker's own queue that the worker does not take now (its tenant
    holds its share of the worker's threads): into its pool's fair queue, with a wake-up,
    where it waits its tenant's turn like any run."""
    queue = queues.pool_queue(pool, tier)
    if fair_queue.enabled() and message.same_redis():
        fair_queue.push(pool=pool, tier=tier, tenant_id=tenant_id, run_id=run_id,
                        wake=message.generate_message(queue, run_id, {"tier": str(tier)}))
        return
    if fair_queue.enabled():
        fair_queue.push(pool=pool, tier=tier, tenant_id=tenant_id, run_id=run_id)
        message.send_generate(queue, run_id, {"tier": str(tier)})
        return
    message.send_generate(queue, run_id, {})


def _forget(run: GenerationRun) -> None:
    try:
        fair_queue.remove(pool=run.pool.name, tier=run.tier, tenant_id=run.tenant_id, run_id=run.pk)
    except Exception:
        log.exception("run %s: could not take it out of the fair queue; the sweep re-sends it", run.pk)
