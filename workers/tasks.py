"""Celery tasks: take ids, call services (or the engine glue)."""
import logging

from celery.exceptions import Reject
from celery.signals import task_postrun, task_received
from django.db import reset_queries

from chatsite import stage_trace
from chatsite.metrics.scaling import pools_record_recommendations
from chatsite.openai_api.responses.services import responses_forget_ended
from chatsite.runs.queues import GENERATE_TASK
from chatsite.runs.services.queued.advance import queues_sweep
from chatsite.runs.services.sweep import runs_sweep
from workers import runtime
from workers.app import app

log = logging.getLogger(__name__)


@task_postrun.connect
def _forget_queries(**_) -> None:
    """Under DEBUG (DJANGO_DEBUG=true, a developer's choice) Django keeps every query of a
    connection, up to 9,000, and a worker's threads each hold a connection that no
    request cycle ever resets: a worker grew by megabytes a minute. Forget them after
    each task, in the thread that ran it."""
    reset_queries()


if stage_trace.enabled():  # bench.probes.probe_ttft --stages: when Celery's consumer took the message
    task_received.connect(lambda **_: stage_trace.mark("worker.received"), weak=False)


@app.task(name=GENERATE_TASK, acks_late=True, reject_on_worker_lost=True)
def generate_run(run_id: int, tier: str | None = None, tenant: int | None = None) -> str:
    """Generate one run on this worker's engine. Idempotent: safe to deliver twice.
    With `tier` the message is a wake-up: it serves the fair next run of this worker's
    pool and that tier (workers.fair_pick); without, the run it names, sent to this
    worker's own queue (its chat's prefix is cached here), in `tenant`'s share of the
    worker's threads."""
    from workers.fair_pick import generate_next, generate_pinned
    from workers.generation import generate

    stage_trace.mark("worker.task")
    rt = runtime.current()
    if rt is None or rt.draining:
        raise Reject("this worker has no engine taking work", requeue=True)
    if tier is not None:
        return generate_next(rt, tier=tier, woken_by=int(run_id))
    if tenant is not None:
        return generate_pinned(rt, run_id=int(run_id), tenant_id=int(tenant))
    return generate(rt, int(run_id))


@app.task(name="workers.sweep_runs")
def sweep_runs() -> dict:
    """Beat: finalize runs whose worker vanished after the end; dispatch again the
    runs no live attempt holds; start the chats' queues no run's end started; forget the
    text of unstored responses that ended while no client waited for them."""
    return {**runs_sweep(), "queues_started": queues_sweep(), "responses_forgotten": responses_forget_ended()}


@app.task(name="workers.record_scale_recommendations")
def record_scale_recommendations() -> dict:
    """Beat: store each pool's recommended replica count (admin, /metrics)."""
    return pools_record_recommendations()
