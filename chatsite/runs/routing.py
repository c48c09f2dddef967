"""The router: which queue a run goes to."""
from chatsite.runs import queues
from chatsite.runs.models import GenerationRun


def queue_for(run: GenerationRun) -> str:
    """The pool's queue for the run's tier."""
    return queues.pool_queue(run.pool.name, run.tier)
