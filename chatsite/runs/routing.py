"""The router: which queue a run goes to.

An interactive turn goes to the worker that served the chat's last turn (its
prefix cache holds the conversation) unless that worker is draining, silent,
hot or (with the fair queue) has all its slots taken; then it spills to the
pool's queue and the chat re-pins to whichever worker takes it. Batch runs always use the pool queue: their priority matters
more than their cache.
"""
from django.conf import settings

from chatsite import redis_keys
from chatsite.pools.health import live_workers
from chatsite.redis_client import get_redis
from chatsite.runs import fair_queue, queues
from chatsite.runs.models import GenerationRun

AFFINITY_TTL_SECONDS = 3600


def affinity_enabled() -> bool:
    return settings.CHATSITE["AFFINITY"]


def worker_is_available(beat: dict | None, pool: str) -> bool:
    """A worker may take pinned work: fresh, same pool, ready, not draining, not hot, and
    (with the fair queue) with a slot free: a pinned turn waits in the worker's own queue
    for a free thread, while in the pool queue a reserve thread takes it at once."""
    if not beat or beat.get("pool") != pool or beat.get("ready") != "1" or beat.get("draining") == "1":
        return False
    limits = settings.CHATSITE
    if fair_queue.enabled() and "slots" in beat and int(beat.get("active_runs", 0)) >= int(beat["slots"]):
        return False
    return (float(beat.get("kv_cache_usage", 0)) < limits["AFFINITY_MAX_KV_USAGE"]
            and int(beat.get("waiting", 0)) <= limits["AFFINITY_MAX_WAITING"])


def queue_for(run: GenerationRun) -> str:
    """The queue for a run: its chat's pinned worker if available, else the pool's tier queue."""
    pool = run.pool.name
    if run.tier == GenerationRun.Tier.INTERACTIVE and affinity_enabled():
        worker = get_redis().get(redis_keys.chat_affinity(run.chat_id))
        if worker and worker_is_available(live_workers().get(worker), pool):
            return queues.worker_queue(worker)
    return queues.pool_queue(pool, run.tier)


def affinity_pin(*, chat_id: int, worker: str) -> None:
    """Remember the worker now holding this chat's prefix in its cache."""
    get_redis().set(redis_keys.chat_affinity(chat_id), worker, ex=AFFINITY_TTL_SECONDS)
