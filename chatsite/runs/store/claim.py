"""The claim's compare-and-set: a run moves to `running` for a new attempt, once."""
from datetime import datetime

from chatsite.runs.models import GenerationRun
from chatsite.runs.store.engine import Columns, fetch_one, prepared, sql_in

_RUN = Columns(GenerationRun, "r")
# One statement (one round trip): a terminal run is left alone.
_CLAIM = prepared(
    f'UPDATE "{GenerationRun._meta.db_table}" r SET status = %s, attempt = attempt + 1, worker = %s, '
    f'started_at = COALESCE(started_at, %s) WHERE id = %s AND status NOT IN {sql_in(GenerationRun.TERMINAL)} '
    f'RETURNING {_RUN.sql}')


def run_take(*, run_id: int, worker: str, now: datetime) -> GenerationRun | None:
    """The run, now `running` under a new attempt by `worker`; None when it is terminal
    or there is no such run."""
    row = fetch_one(_CLAIM, [GenerationRun.Status.RUNNING, worker, now, run_id])
    return None if row is None else _RUN.build(row)
