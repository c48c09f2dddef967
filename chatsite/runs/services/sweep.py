"""The beat sweep: runs whose worker vanished reconverge here."""
import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from chatsite import redis_keys
from chatsite.pools.health import live_workers
from chatsite.redis_client import get_redis
from chatsite.runs.dispatch import run_dispatch
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.finalize import run_finalize
from chatsite.runs.stream_reader import read_reply

log = logging.getLogger(__name__)

QUEUED_GRACE = timedelta(minutes=5)  # a queued run may legitimately wait this long
PINNED_GRACE = timedelta(seconds=15)  # ...unless it waits in the queue of a worker that is gone
REDISPATCH_GUARD_SECONDS = 15


def runs_sweep() -> dict:
    """Finalize running runs whose stream ended but whose worker died before saving;
    dispatch again running runs no live attempt holds, and queued runs whose task
    was lost. Returns counts of what it did."""
    r = get_redis()
    now = timezone.now()
    lease_grace = timedelta(seconds=settings.CHATSITE["RUN_LEASE_SECONDS"])
    counts = {"finalized": 0, "redispatched": 0}
    running = GenerationRun.objects.filter(status=GenerationRun.Status.RUNNING, started_at__lt=now - lease_grace)
    queued = GenerationRun.objects.filter(status=GenerationRun.Status.QUEUED, queued_at__lt=now - PINNED_GRACE)
    alive = live_workers()
    stranded = [run for run in queued.select_related("pool")[:500]
                if run.queued_at < now - QUEUED_GRACE or _pinned_to_dead_worker(r, run, alive)]
    for run in list(running.select_related("pool")[:500]) + stranded:
        if r.exists(redis_keys.run_lease(run.pk)):
            continue
        if read_reply(run.pk).terminal is not None:
            if run_finalize(run_id=run.pk) is not None:
                counts["finalized"] += 1
            continue
        # One re-dispatch per guard window, however often the sweep runs.
        if r.set(redis_keys.run_redispatch_guard(run.pk), "1", nx=True, ex=REDISPATCH_GUARD_SECONDS):
            log.warning("run %s (%s) has no live attempt; dispatching it again", run.pk, run.status)
            run_dispatch(run, affinity=False)  # its pinned worker is the one that died
            counts["redispatched"] += 1
    return counts


def _pinned_to_dead_worker(r, run: GenerationRun, alive: dict) -> bool:
    worker = r.get(redis_keys.chat_affinity(run.chat_id))
    return bool(worker) and worker not in alive
