"""The router: which queue a run goes to.

An interactive turn that builds on a reply whose token ids were kept goes to the worker
whose prefix cache took the longest indexed prefix of those ids (`prefix_index`): a
branch or an older path's next turn finds the worker that computed it, whichever worker
the chat last used. Otherwise (or when no holder is available) it goes to the worker that
served the chat's last turn, unless that worker is draining, silent, hot or (with the
fair queue) has all its slots taken; then it spills to the pool's queue and the chat
re-pins to whichever worker takes it. Batch runs always use the pool queue: their
priority matters more than their cache. The n choices of one completion are pinned
together to one worker before they are dispatched (`choices_pin`), so the prompt they
share is computed once in its prefix cache.
"""
from django.conf import settings

from chatsite import redis_keys
from chatsite.pools.health import live_workers
from chatsite.redis_client import get_redis
from chatsite.runs import fair_queue, prefix_index, queues
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


def queue_for(run: GenerationRun, *, pinned: bool = True, builds_on: int | None = None) -> str:
    """The queue for a run: the available worker holding the longest indexed prefix of
    the kept ids of reply `builds_on` (the reply its prompt starts with), else its chat's
    pinned worker if available, else the pool's tier queue. `pinned=False`: its chat has
    no pin to look up (the one choice of a chat its admission made). One round trip for
    the pin and the holders, and the live workers' two when there is a worker to check."""
    pool = run.pool.name
    if run.tier == GenerationRun.Tier.INTERACTIVE and affinity_enabled() and pinned:
        if builds_on is None:
            candidates = [get_redis().get(redis_keys.chat_affinity(run.chat_id))]
        else:
            pin, holders = prefix_index.lookup(chat_id=run.chat_id, reply_id=builds_on, pool=pool)
            candidates = [*holders, pin]
        if any(candidates):
            workers = live_workers()
            worker = next((w for w in candidates if w and worker_is_available(workers.get(w), pool)), None)
            if worker is not None:
                return queues.worker_queue(worker)
    return queues.pool_queue(pool, run.tier)


def affinity_pin(*, chat_id: int, worker: str, redis=None) -> None:
    """Remember the worker now holding this chat's prefix in its cache (through `redis`,
    a caller's pipeline, when given)."""
    (redis or get_redis()).set(redis_keys.chat_affinity(chat_id), worker, ex=AFFINITY_TTL_SECONDS)


def worker_for_choices(workers: dict[str, dict], pool: str, count: int) -> str | None:
    """Of live workers' heartbeats, the available one with the most free slots, if it
    has at least `count` (the choices would otherwise wait for its threads); None
    when there is none. Without the fair queue any available worker will do."""
    free = {}
    for name, beat in workers.items():
        if worker_is_available(beat, pool):
            free[name] = int(beat.get("slots", count)) - int(beat.get("active_runs", 0))
    best = max(free, key=free.get, default=None)
    if best is None or (fair_queue.enabled() and free[best] < count):
        return None
    return best


def choices_pin(run: GenerationRun, count: int) -> None:
    """Before a completion's `count` choices are dispatched (run is the first): pin its
    chat to one worker that can take them all, unless a worker already pinned is
    available, so that queue_for sends every choice there. With no such worker
    nothing is pinned: the choices go through the pool queue like any runs."""
    if run.tier != GenerationRun.Tier.INTERACTIVE or not affinity_enabled():
        return
    workers = live_workers()
    pinned = get_redis().get(redis_keys.chat_affinity(run.chat_id))
    if pinned and worker_is_available(workers.get(pinned), run.pool.name):
        return
    worker = worker_for_choices(workers, run.pool.name, count)
    if worker is not None:
        affinity_pin(chat_id=run.chat_id, worker=worker)
