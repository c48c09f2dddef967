"""A run's end in one statement: the run's row locked and updated, its reply's text
saved and the tenant's usage settled, by data-modifying CTEs, in one round trip. The
four statements and the transaction they replaced cost the worker and Postgres more
CPU than the rest of the finalize (bench.per_run)."""
from dataclasses import dataclass, fields
from datetime import datetime

from chatsite.chats.models import Message, MessageTokens, QueuedMessage
from chatsite.quotas.models import TenantQuota, TenantUsage
from chatsite.quotas.periods import period_start_sql
from chatsite.runs.models import GenerationRun
from chatsite.runs.store.engine import fetch_one, prepared, sql_in
from chatsite.runs.store.tokens import pack
from inference.token_prefix import TokenRecord

_RUNS = GenerationRun._meta.db_table
_POOLS = GenerationRun._meta.get_field("pool").related_model._meta.db_table


@dataclass(frozen=True, slots=True)
class Ending:
    """What the run's stream says of its end (None: the field keeps its value)."""
    status: str
    finished_at: datetime
    finish_reason: str
    completion_tokens: int
    prompt_tokens: int | None  # None for a failed run: what admission estimated stays
    error: str | None
    first_token_at: datetime | None  # None for a run that streamed no token
    itl_ms: float | None
    logprobs: str  # JSON, saved only if the run asked for them
    details: str | None  # JSON: the prompt tokens the prefix cache served, the details the run asked for
    text: str  # the reply's text (appended: a continued reply's message holds its start)


_ENDING = tuple(f.name for f in fields(Ending))


def _settle(run: str) -> str:
    """The run settled on its tenant's usage row: its reservation released, the tokens it
    used recorded, on the row of the period it was queued in (made if that period has none
    yet). `run`: a CTE of one row with tenant_id, queued_at, reserved_tokens, used and the
    tenant's budget `period` (NULL: month)."""
    usage = TenantUsage._meta.db_table
    return (f'INSERT INTO "{usage}" AS u (tenant_id, period_start, used_tokens, reserved_tokens, refused_requests) '
            f'SELECT {run}.tenant_id, {period_start_sql(f"{run}.queued_at", f"{run}.period")}, {run}.used, 0, 0 '
            f'FROM {run} ON CONFLICT (tenant_id, period_start) DO UPDATE SET '
            f'reserved_tokens = GREATEST(u.reserved_tokens - (SELECT reserved_tokens FROM {run}), 0), '
            f'used_tokens = u.used_tokens + EXCLUDED.used_tokens')


_QUEUED = QueuedMessage._meta.db_table
_KEEPS_TOKENS = (GenerationRun.Status.COMPLETED, GenerationRun.Status.CANCELLED)  # a stopped reply is kept as written
# A stopped run whose stop a queued message's "send now" asked for ends "interrupted" (the send
# now's marker says so too, before its message names the run: services.finalize reads it).
_REASON = (f"CASE WHEN %(finish_reason)s::text = 'cancelled' AND EXISTS (SELECT 1 FROM \"{_QUEUED}\" i "
           f"WHERE i.interrupted_run_id = r.id) THEN 'interrupted' ELSE %(finish_reason)s END")


@dataclass(frozen=True, slots=True)
class Finished:
    """What the run's end saved that its finalize goes on with. The run's other columns are
    not read back: its 35 columns built into a model cost 23 us a run, and their reading
    ~95 us more of the round trip than these (a probe, 3,000 calls)."""
    chat_id: int
    status: str
    ttft_ms: int | None
    itl_ms: float | None
    pool_name: str
    queue_waiting: bool  # messages wait in the run's chat's queue (chats.QueuedMessage)


# r: the run, if it is not terminal yet, locked (FOR UPDATE OF the run only: locking the
# quota row the join reads deadlocked with admissions); a second finalize waits here for the
# first to commit, then finds the run terminal and changes nothing. The choices of a
# completion after the first answer the same prompt: their prompt tokens count once.
_FINISH = prepared(
    f'WITH r AS (SELECT g.id, g.tenant_id, g.queued_at, g.reserved_tokens, g.assistant_message_id, '
    f'(CASE WHEN g.choice_of_id IS NULL THEN COALESCE(%(prompt_tokens)s::integer, g.prompt_tokens) ELSE 0 END) '
    f'+ %(completion_tokens)s::integer AS used, '
    f"COALESCE(jsonb_typeof(g.sampling -> 'logprobs'), 'null') <> 'null' AS keeps_logprobs, q.period "
    f'FROM "{_RUNS}" g LEFT JOIN "{TenantQuota._meta.db_table}" q ON q.tenant_id = g.tenant_id '
    f'WHERE g.id = %(run_id)s AND g.status NOT IN {sql_in(GenerationRun.TERMINAL)} FOR UPDATE OF g), '
    f'saved AS (UPDATE "{_RUNS}" g SET status = %(status)s, finished_at = %(finished_at)s, '
    f'completion_tokens = %(completion_tokens)s, finish_reason = {_REASON}, '
    f'prompt_tokens = COALESCE(%(prompt_tokens)s::integer, g.prompt_tokens), error = COALESCE(%(error)s, g.error), '
    f'first_token_at = COALESCE(%(first_token_at)s::timestamptz, g.first_token_at), '
    f'ttft_ms = CASE WHEN %(first_token_at)s::timestamptz IS NULL THEN g.ttft_ms '
    f'ELSE GREATEST(0, floor(extract(epoch FROM %(first_token_at)s::timestamptz - g.queued_at) * 1000))::integer END, '
    f'itl_ms = COALESCE(%(itl_ms)s::double precision, g.itl_ms), '
    f'logprobs = CASE WHEN r.keeps_logprobs THEN %(logprobs)s::jsonb ELSE g.logprobs END, '
    f'details = COALESCE(%(details)s::jsonb, g.details) '
    f'FROM r WHERE g.id = r.id RETURNING g.chat_id, g.status, g.ttft_ms, g.itl_ms, g.pool_id), '
    f'reply AS (UPDATE "{Message._meta.db_table}" m SET content = m.content || %(text)s, '
    f'token_count = m.token_count + %(completion_tokens)s FROM r WHERE m.id = r.assistant_message_id), '
    f'settled AS ({_settle("r")}), '
    # A completed or stopped reply's token ids, when its worker has them (the next turn starts with
    # them): kept whether this finalize ends the run or a web process's came first (a /v1 call that
    # waits for its whole reply finalizes it as soon as the stream ends).
    f'kept AS (INSERT INTO "{MessageTokens._meta.db_table}" (message_id, token_ids, digest, dropped) '
    f'SELECT k.assistant_message_id, %(token_ids)s::bytea, %(token_digest)s, %(token_dropped)s FROM "{_RUNS}" k '
    f"WHERE k.id = %(run_id)s AND %(token_ids)s::bytea IS NOT NULL AND %(status)s IN {sql_in(_KEEPS_TOKENS)} "
    f'ON CONFLICT (message_id) DO UPDATE SET token_ids = EXCLUDED.token_ids, digest = EXCLUDED.digest, '
    f'dropped = EXCLUDED.dropped) '
    f'SELECT s.chat_id, s.status, s.ttft_ms, s.itl_ms, p.name, '
    f'EXISTS (SELECT 1 FROM "{_QUEUED}" q WHERE q.chat_id = s.chat_id '
    f"AND q.state = 'queued') "
    f'FROM saved s JOIN "{_POOLS}" p ON p.id = s.pool_id')
_STATUS = prepared(f'SELECT status FROM "{_RUNS}" WHERE id = %s')


def run_finish(*, run_id: int, ending: Ending, tokens: TokenRecord | None = None) -> Finished | None:
    """End the run as `ending` says, and keep `tokens` (its reply's token ids) if it
    completed or was stopped (the text it kept); None when the run is terminal already (its
    `tokens` kept all the same: a web process's finalize may come first) or there is no such run."""
    params = {name: getattr(ending, name) for name in _ENDING}
    params["run_id"] = run_id
    params["token_ids"] = None if tokens is None else pack(tokens.token_ids)
    params["token_digest"] = None if tokens is None else tokens.digest
    params["token_dropped"] = 0 if tokens is None else tokens.dropped
    row = fetch_one(_FINISH, params)
    return None if row is None else Finished(*row)


def run_status(*, run_id: int) -> str | None:
    """The run's status (None: there is no such run)."""
    row = fetch_one(_STATUS, [run_id])
    return None if row is None else row[0]
