"""Load shedding at the edge: refuse early with Retry-After, never a request that hangs."""
import math
from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from chatsite.errors import Overloaded
from chatsite.metrics.counters import count_shed
from chatsite.runs.models import GenerationRun

RATE_WINDOW = timedelta(seconds=60)


def expected_wait_seconds(pool) -> tuple[int, float | None]:
    """(queued runs, expected seconds until a new run starts), from the pool's
    completion rate over the last minute; None when it cannot be estimated yet."""
    queued_q = Q(status=GenerationRun.Status.QUEUED)
    finished_q = Q(finished_at__gte=timezone.now() - RATE_WINDOW)
    counts = GenerationRun.objects.filter(queued_q | finished_q, pool=pool).aggregate(  # one query for both
        queued=Count("pk", filter=queued_q), finished=Count("pk", filter=finished_q))
    queued, finished = counts["queued"], counts["finished"]
    if queued == 0:
        return 0, 0.0
    if finished == 0:
        return queued, None
    return queued, queued / (finished / RATE_WINDOW.total_seconds())


def shed_if_overloaded(pool) -> None:
    """Raise Overloaded (503 + Retry-After) when the pool's queue is over its limits."""
    queued, wait = expected_wait_seconds(pool)
    if queued >= pool.max_queued_runs:
        count_shed(pool.name)
        retry = math.ceil(wait - pool.max_queue_wait_seconds) if wait else 10
        raise Overloaded(f"model {pool.name!r} has {queued} requests waiting, the most it queues; "
                         f"try again in a little while", retry_after=max(1, min(retry, 300)))
    if wait is not None and wait > pool.max_queue_wait_seconds:
        count_shed(pool.name)
        raise Overloaded(f"model {pool.name!r} is busy: a new request would wait about {math.ceil(wait)} s; "
                         f"try again shortly", retry_after=max(1, min(math.ceil(wait - pool.max_queue_wait_seconds), 300)))
