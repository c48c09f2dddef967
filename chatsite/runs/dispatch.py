"""Handing a committed run to Celery."""
import logging

from chatsite.runs import queues
from chatsite.runs.models import GenerationRun
from chatsite.runs.routing import queue_for

log = logging.getLogger(__name__)


class _Sent:
    """What send_task returns for a task whose result nobody reads. Celery's default
    AsyncResult builds the result backend, per thread: under ASGI every request has
    its own thread, and that build scanned the installed packages' entry points
    (a third of the web's time in a message POST, measured with py-spy)."""

    __slots__ = ("id", "ignored")

    def __init__(self, task_id: str):
        self.id = task_id


def run_dispatch(run: GenerationRun, *, affinity: bool = True) -> None:
    """Send the generation task. Called after commit, so a worker never sees a run
    that is not in Postgres. If the broker is down the run stays queued and the
    beat sweep dispatches it again. `affinity=False` skips the pinned worker (the
    sweep re-dispatching a run whose worker died)."""
    from chatsite.celery import app

    queue = queue_for(run) if affinity else queues.pool_queue(run.pool.name, run.tier)
    try:
        app.send_task(queues.GENERATE_TASK, args=[run.pk], queue=queue, ignore_result=True,
                      result_cls=_Sent, add_to_parent=False)
    except Exception:
        log.exception("run %s: dispatch to %s failed; the sweep will retry", run.pk, queue)
