"""A pool's queue as admission's shedding counts it: the runs queued, the asking
tenant's among them and the tenants waiting (read with the pool or the chat a turn is
admitted on: `lateral`), the runs it finished lately and the runs it is running."""
from dataclasses import dataclass
from datetime import datetime

from chatsite.runs.models import GenerationRun
from chatsite.runs.store.engine import fetch_one, sql_in

_RUNS = GenerationRun._meta.db_table


@dataclass(frozen=True, slots=True)
class QueueCounts:
    queued: int  # runs queued in the pool
    mine: int  # ...of them the asking tenant's
    tenants: int  # tenants with queued runs, the asking one not counted unless it has some


def lateral(pool_alias: str) -> str:
    """`LATERAL (...) q` for a statement that reads a pool as `pool_alias`: the three
    counts of QueueCounts (its one parameter: the asking tenant's id), on the (pool,
    status) index, as the statement's last three columns."""
    return (f'LATERAL (SELECT count(*), count(*) FILTER (WHERE r.tenant_id = %s), count(DISTINCT r.tenant_id) '
            f'FROM "{_RUNS}" r WHERE r.pool_id = {pool_alias}.id '
            f'AND r.status IN {sql_in([GenerationRun.Status.QUEUED])}) q')


_QUEUED = f'SELECT q.* FROM "{GenerationRun._meta.get_field("pool").related_model._meta.db_table}" p, {lateral("p")} ' \
          f'WHERE p.id = %s'
_FINISHED = (f'SELECT count(*), avg(extract(epoch FROM finished_at - started_at)) FROM "{_RUNS}" '
             f'WHERE pool_id = %s AND finished_at >= %s')
_RUNNING = f'SELECT count(*) FROM "{_RUNS}" WHERE pool_id = %s AND status = %s'


def queue_counts(*, tenant_id: int, pool_id: int) -> QueueCounts:
    """The pool's queue, in a round trip of its own (when no read of the turn brought it)."""
    return QueueCounts(*fetch_one(_QUEUED, [tenant_id, pool_id]))


def finished_since(*, pool_id: int, since: datetime) -> tuple[int, float | None]:
    """Runs of the pool finished since `since`, on the (pool, finished_at) index, and
    their mean seconds from start to finish (None when none had started)."""
    finished, run_seconds = fetch_one(_FINISHED, [pool_id, since])
    return finished, float(run_seconds) if run_seconds is not None else None


def running_count(*, pool_id: int) -> int:
    return fetch_one(_RUNNING, [pool_id, GenerationRun.Status.RUNNING])[0]
