"""The Celery app: Redis broker, late acks, one task at a time per slot, threads.

`celery -A chatsite worker --model-pool NAME` starts a worker that loads NAME's
engine once (workers.bootstep) and consumes that pool's queues.
"""
import os

import click
from celery import Celery

from chatsite.runs.queues import MAINTENANCE
from workers.broker import transport_for

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")

from django.conf import settings  # noqa: E402  (lazy: read, not set up)

app = Celery("chatsite", include=["workers.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    # One engine serves many runs at once: each run's task waits on a thread.
    worker_pool="threads",
    # (and, with the fair queue, a few reserve threads for tenants under their cap: workers.fair_pick)
    worker_concurrency=settings.CHATSITE["WORKER_SLOTS"]
    + (settings.CHATSITE["WORKER_RESERVE_SLOTS"] if settings.CHATSITE["FAIR_QUEUE"] else 0),
    task_create_missing_queues=True,
    task_default_queue=MAINTENANCE,
    task_ignore_result=True,
    # No result backend (Celery's DisabledBackend, stateless): one for the app, not one per
    # thread, each built by scanning the installed packages' entry points (21 ms of CPU here),
    # in every task thread's first task.
    result_backend_thread_safe=True,
    broker_connection_retry_on_startup=True,
    broker_transport=transport_for(settings.CELERY_BROKER_URL),  # kombu's Redis, one client per pool (workers/broker.py)
    broker_transport_options={
        # A message unacknowledged this long is delivered again (a dead worker's runs).
        "visibility_timeout": settings.CHATSITE["VISIBILITY_TIMEOUT_SECONDS"],
        # Consume queues in the order given: own queue, interactive, then batch.
        "queue_order_strategy": "priority",
    },
    worker_hijack_root_logger=False,
    beat_schedule={
        "sweep-runs": {"task": "workers.sweep_runs", "schedule": settings.CHATSITE["SWEEP_SECONDS"]},
        "scale-recommendations": {"task": "workers.record_scale_recommendations", "schedule": 30.0},
    },
)

app.user_options["worker"].add(
    click.Option(["--model-pool"], default=None, help="Serve this model pool: load its engine once, consume its queues.")
)

from workers import control  # noqa: E402,F401  (registers drain / engine_stats for the CLI too)
from workers.bootstep import EngineStep  # noqa: E402  (needs `app` above)

app.steps["worker"].add(EngineStep)
