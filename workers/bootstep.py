"""The worker bootstep that loads one engine for the whole life of the worker."""
import logging

from celery import bootsteps

from chatsite import redis_durability
from chatsite.runs import queues

log = logging.getLogger(__name__)


class EngineStep(bootsteps.StartStopStep):
    """Starts before the consumer: no task is taken until the engine is ready."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker, model_pool=None, **kwargs):
        super().__init__(worker, **kwargs)
        self.pool_name = model_pool
        if model_pool:
            # Own queue first (affinity), then the pool's tiers, interactive first, then beat's sweeps.
            names = [queues.worker_queue(worker.hostname), *queues.pool_queues(model_pool), queues.MAINTENANCE]
            worker.app.amqp.queues.select(names)

    def start(self, worker):
        redis_durability.check_at_start(f"worker {worker.hostname}")
        if not self.pool_name:
            return
        from workers import runtime

        runtime.start(pool_name=self.pool_name, worker_name=worker.hostname)

    def stop(self, worker):
        if not self.pool_name:
            return
        from workers import runtime

        runtime.stop()
