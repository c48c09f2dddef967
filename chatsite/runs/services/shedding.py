"""Load shedding at the edge: refuse early with Retry-After, never a request that hangs.

With fair ordering (chatsite.runs.fair_queue) each tenant holds a share of a pool's
queue limit: over the limit, a tenant is refused only while it holds at least its
share (the limit divided by the tenants with queued runs, itself included), so one
tenant's flood never sheds another, and a lone tenant may still use the whole limit.
Its expected wait is counted in its own turns, not behind every queued run."""
import dataclasses
import math
import time
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from chatsite.errors import Overloaded
from chatsite.counters import count_shed
from chatsite.pools.health import pool_slots
from chatsite.runs import fair_queue
from chatsite.runs.store import queue as store
from chatsite.runs.store.queue import QueueCounts

RATE_WINDOW = timedelta(seconds=60)
# What the path that would refuse reads of a pool's finished runs and its workers' slots, a process reads
# at most once a MEMO_SECONDS per pool: a second's lag on a minute's window, and on heartbeats a second apart.
MEMO_SECONDS = 1.0
_memo: dict[tuple, tuple[float, object]] = {}  # (what, pool) -> (monotonic time, value)


@dataclass(frozen=True, slots=True)
class Backlog:
    queued: int  # runs queued in the pool
    mine: int  # ...of them the asking tenant's
    tenants: int  # tenants with queued runs, the asking one included
    finished: int  # runs the pool finished in the last RATE_WINDOW
    run_seconds: float | None = None  # ...their mean time from start to finish

    def share(self, limit: int) -> float:
        return limit / self.tenants

    def ahead(self, fair: bool) -> int:
        """Queued runs a new run of the tenant would wait for: all of them in FIFO order;
        in fair order at most one turn of every other tenant per run of its own ahead."""
        if not fair:
            return self.queued
        return min(self.queued, (self.mine + 1) * self.tenants - 1)

    def wait_seconds(self, fair: bool, free: int = 0, slots: int = 0) -> float | None:
        """Expected seconds until a new run starts, from the finish rate; None when it cannot be told yet.
        `free`: run slots free in the pool's workers, which the first runs ahead take at once. `slots`:
        all their slots, which free at least at slots / run_seconds runs a second once they are full
        (the finish rate of a pool that was not full says what it was asked for, not what it can do)."""
        ahead = max(0, self.ahead(fair) - free)
        if ahead == 0:
            return 0.0
        rate = self.finished / RATE_WINDOW.total_seconds()
        if slots and self.run_seconds:
            rate = max(rate, slots / self.run_seconds)
        if rate == 0:
            return None
        return ahead / rate


def pool_backlog(pool, tenant_id: int, queue: QueueCounts | None = None) -> Backlog:
    """The pool's queue and the tenant's part of it (`queue`, as admission read it with the
    pool or the chat, or read now), and the pool's finish rate, read only when a new run
    would wait at all."""
    if queue is None:
        queue = store.queue_counts(tenant_id=tenant_id, pool_id=pool.pk)
    backlog = Backlog(queued=queue.queued, mine=queue.mine, tenants=queue.tenants + (0 if queue.mine else 1),
                      finished=0)
    if backlog.ahead(fair_queue.enabled()) == 0:
        return backlog
    finished, run_seconds = _finished_recently(pool)
    return dataclasses.replace(backlog, finished=finished, run_seconds=run_seconds)


def free_slots(pool, slots: int) -> int:
    """Run slots free in the pool's live workers: their `slots` (pool_slots, from their
    heartbeats) less the pool's running runs (Postgres: exact where a heartbeat is up to a
    second old). Asked only when a new run would otherwise be refused for its wait."""
    if slots == 0:
        return 0
    return max(0, slots - store.running_count(pool_id=pool.pk))


def _finished_recently(pool) -> tuple[int, float | None]:
    """Runs of the pool finished in the last RATE_WINDOW, on the (pool, finished_at)
    index: as many rows as the pool finished in that window, not every run it ever had;
    and their mean seconds from start to finish (None when none had started).
    That is a cost which grows with the pool's throughput (1.2-2.5 ms of Postgres for
    6,000 runs a minute, most of them not yet all-visible), so a process counts at
    most once a MEMO_SECONDS per pool."""
    return _memoized(("finished", pool.pk),
                     lambda: store.finished_since(pool_id=pool.pk, since=timezone.now() - RATE_WINDOW))


def _slots(pool) -> int:
    """pool_slots, at most once a MEMO_SECONDS per pool: a pool refusing every request
    reads its workers' heartbeats once a second, not per refusal."""
    return _memoized(("slots", pool.name), lambda: pool_slots(pool.name))


def _memoized(key: tuple, read):
    now = time.monotonic()
    hit = _memo.get(key)
    if hit is None or now - hit[0] >= MEMO_SECONDS:
        hit = _memo[key] = (now, read())
    return hit[1]


def forget_memos() -> None:
    """Drop what the memo holds (tests that rewrite a pool's runs or its workers' heartbeats)."""
    _memo.clear()


def shed_if_overloaded(pool, tenant, *, queue: QueueCounts | None = None, arriving: int = 1) -> None:
    """Raise Overloaded (503 + Retry-After) when the pool's queue is over its limits:
    over max_queued_runs while the tenant holds at least its share of it (all of it
    without fair ordering), or when the tenant's expected wait is past max_queue_wait_seconds.
    `arriving`: the runs this request would queue (a completion's n choices, each a run
    of the tenant's share): the queue may not go past its limit by them. `queue`: the
    pool's queue as admission read it."""
    fair = fair_queue.enabled()
    backlog = pool_backlog(pool, tenant.pk, queue)
    wait = backlog.wait_seconds(fair)
    if wait is not None and wait > pool.max_queue_wait_seconds:
        # The finish rate measures what the pool was asked for, not what it can do: a burst
        # into a pool that was quiet would be refused for a wait its workers' slots do not make.
        slots = _slots(pool)
        wait = backlog.wait_seconds(fair, free=free_slots(pool, slots), slots=slots)
    limit = pool.max_queued_runs
    # (With one arriving run these read: queued >= limit, and the tenant holds its share.)
    if backlog.queued + arriving > limit and (not fair or backlog.mine + arriving - 1 >= backlog.share(limit)):
        count_shed(pool.name)
        retry = math.ceil(wait - pool.max_queue_wait_seconds) if wait else 10
        full = f"model {pool.name!r} has {backlog.queued} requests waiting, the most it queues"
        if backlog.queued < limit:  # several choices that do not fit in what is left
            full = (f"model {pool.name!r} has {backlog.queued} requests waiting and queues at most {limit}: "
                    f"the {arriving} runs of this request do not fit")
        if not fair:
            why = f"{full}; try again in a little while"
        elif backlog.tenants == 1:
            why = f"{full}, and all of them are yours; try again when some of them have started"
        else:
            why = (f"{full}, and {backlog.mine} of them are yours, at least your share ({limit} / {backlog.tenants} "
                   f"tenants waiting = {math.ceil(backlog.share(limit))}); try again when some of yours have started")
        raise Overloaded(why, retry_after=max(1, min(retry, 300)))
    if wait is not None and wait > pool.max_queue_wait_seconds:
        count_shed(pool.name)
        whose = " behind your own and other tenants' turns" if fair and backlog.tenants > 1 else ""
        raise Overloaded(f"model {pool.name!r} is busy: a new request would wait about {math.ceil(wait)} s{whose}; "
                         f"try again shortly", retry_after=max(1, min(math.ceil(wait - pool.max_queue_wait_seconds), 300)))
