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
from chatsite.metrics.counters import count_shed
from chatsite.pools.health import pool_slots
from chatsite.pools.models import ModelPool
from chatsite.pools.selectors import POOL_COLUMNS, plausible_pool_name, pool_checked
from chatsite.rows import fetch_one, prepared
from chatsite.runs import fair_queue
from chatsite.runs.models import GenerationRun
from chatsite.runs.selectors import keep_queue_read, queue_lateral, take_queue_read

RATE_WINDOW = timedelta(seconds=60)
# What the path that would refuse reads of a pool's finished runs and its workers' slots, a process reads
# at most once a MEMO_SECONDS per pool: a second's lag on a minute's window, and on heartbeats a second apart.
MEMO_SECONDS = 1.0
_memo: dict[tuple, tuple[float, object]] = {}  # (what, pool) -> (monotonic time, value)
# Plain SQL: every admission asks (chatsite/rows.py).
_RUNS = GenerationRun._meta.db_table
# A pool's queue (parameters: the tenant, the pool's id), counted as every admission reads it (queue_lateral).
_QUEUED = f'SELECT q.* FROM "{POOL_COLUMNS.table}" p, {queue_lateral("p")} WHERE p.id = %s'
# A pool by name and its queue (parameters: the tenant, the name), in one round trip:
# what a call that makes a chat for its run reads before admitting it (pool_for_admission).
_POOL_AND_QUEUE = prepared(
    f'SELECT {POOL_COLUMNS.sql}, q.* FROM "{POOL_COLUMNS.table}" p, {queue_lateral("p")} WHERE p.name = %s')
_FINISHED = (f'SELECT count(*), avg(extract(epoch FROM finished_at - started_at)) FROM "{_RUNS}" '
             f'WHERE pool_id = %s AND finished_at >= %s')
_RUNNING = f'SELECT count(*) FROM "{_RUNS}" WHERE pool_id = %s AND status = %s'


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


def pool_for_admission(tenant, name) -> ModelPool:
    """pool_for_tenant(tenant, name), with the pool's queue read in the same statement for
    the admission that follows (pool_backlog takes it, once): a /v1 or Responses call makes
    a chat, then admits its run, and asked Postgres for the two in two round trips."""
    row = fetch_one(_POOL_AND_QUEUE, [tenant.pk, name]) if plausible_pool_name(name) else None
    pool = None
    if row is not None:
        pool = POOL_COLUMNS.build(row[:len(POOL_COLUMNS)])
        keep_queue_read(pool, tenant, row[len(POOL_COLUMNS):])
    return pool_checked(tenant, name, pool)


def pool_backlog(pool, tenant) -> Backlog:
    """The pool's queue and the tenant's part of it (one query on the (pool, status)
    index, unless the statement that read the pool or the chat for this admission read it
    too: runs.selectors.queue_lateral), and the pool's finish rate, read only when a new
    run would wait at all."""
    read = take_queue_read(pool, tenant)  # once: a later admission with this pool reads its own
    if read is not None:
        queued, mine, tenants = read
    else:
        queued, mine, tenants = fetch_one(_QUEUED, [tenant.pk, pool.pk])
    backlog = Backlog(queued=queued, mine=mine, tenants=tenants + (0 if mine else 1), finished=0)
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
    return max(0, slots - fetch_one(_RUNNING, [pool.pk, GenerationRun.Status.RUNNING])[0])


def _finished_recently(pool) -> tuple[int, float | None]:
    """Runs of the pool finished in the last RATE_WINDOW, on the (pool, finished_at)
    index: as many rows as the pool finished in that window, not every run it ever had;
    and their mean seconds from start to finish (None when none had started).
    That is a cost which grows with the pool's throughput (1.2-2.5 ms of Postgres for
    6,000 runs a minute, most of them not yet all-visible), so a process counts at
    most once a MEMO_SECONDS per pool."""
    def read():
        finished, run_seconds = fetch_one(_FINISHED, [pool.pk, timezone.now() - RATE_WINDOW])
        return finished, float(run_seconds) if run_seconds is not None else None
    return _memoized(("finished", pool.pk), read)


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


def shed_if_overloaded(pool, tenant, *, arriving: int = 1) -> None:
    """Raise Overloaded (503 + Retry-After) when the pool's queue is over its limits:
    over max_queued_runs while the tenant holds at least its share of it (all of it
    without fair ordering), or when the tenant's expected wait is past max_queue_wait_seconds.
    `arriving`: the runs this request would queue (a completion's n choices): the queue
    may not go past its limit by them."""
    fair = fair_queue.enabled()
    backlog = pool_backlog(pool, tenant)
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
