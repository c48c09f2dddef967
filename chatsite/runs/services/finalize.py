"""Finalize: the durable record, rebuilt from the run's own stream.

Every run ends here, once, so after reading the stream it is one SQL statement, in one
round trip: the run's row locked and updated, its message's text saved and the tenant's
usage settled, by data-modifying CTEs. The four statements and the transaction around
them it replaces cost the worker and Postgres more CPU than the rest of the finalize
(bench/per_run.py), as the ORM's compilation of them had before that (bench/lifecycle_cpu.py)."""
import json
import logging
from datetime import datetime, timezone as dt_timezone

from django.utils import timezone

from chatsite import rows
from chatsite.chats.models import Message
from chatsite.metrics.counters import observe_latencies
from chatsite.quotas.models import TenantQuota
from chatsite.quotas.services import settle_sql
from chatsite.runs.models import GenerationRun
from chatsite.runs.stream import codec, log
from chatsite.runs.stream.log import Reply

logger = logging.getLogger(__name__)

_RUNS = GenerationRun._meta.db_table
_POOLS = GenerationRun._meta.get_field("pool").related_model._meta.db_table
# The run's columns but its prompt snapshot (it can be the chat's last 200 messages and
# finalize does not read it).
_RUN = rows.Columns(GenerationRun, "g", exclude=("prompt_snapshot",))
_SAVED = rows.Columns(GenerationRun, "s", exclude=("prompt_snapshot",))
# r: the run, if it is not terminal yet, locked (FOR UPDATE OF the run only: locking the
# quota row the join reads deadlocked with admissions); a second finalize waits here for
# the first to commit, then finds the run terminal and changes nothing. A field the stream
# does not tell (a failed run's prompt tokens, a run with no token's timings) keeps its
# value. Parameters: prompt tokens (NULL: kept), completion tokens, the run's id; status,
# finished_at, completion tokens, finish reason, prompt tokens,
# error (NULL: kept), first token's time (three times; NULL: kept), ITL (NULL: kept),
# logprobs (JSON, saved only if the run asked for them), details (JSON; NULL: kept); the
# reply's text and tokens.
_FINALIZE = rows.prepared(
    f'WITH r AS (SELECT g.id, g.tenant_id, g.queued_at, g.reserved_tokens, g.assistant_message_id, '
    f'(CASE WHEN g.choice_of_id IS NULL THEN COALESCE(%s::integer, g.prompt_tokens) ELSE 0 END) + %s::integer AS used, '
    f"COALESCE(jsonb_typeof(g.sampling -> 'logprobs'), 'null') <> 'null' AS keeps_logprobs, q.period "
    f'FROM "{_RUNS}" g LEFT JOIN "{TenantQuota._meta.db_table}" q ON q.tenant_id = g.tenant_id '
    f'WHERE g.id = %s AND g.status NOT IN {rows.sql_in(GenerationRun.TERMINAL)} FOR UPDATE OF g), '
    f'saved AS (UPDATE "{_RUNS}" g SET status = %s, finished_at = %s, completion_tokens = %s, finish_reason = %s, '
    f'prompt_tokens = COALESCE(%s::integer, g.prompt_tokens), error = COALESCE(%s, g.error), '
    f'first_token_at = COALESCE(%s::timestamptz, g.first_token_at), '
    f'ttft_ms = CASE WHEN %s::timestamptz IS NULL THEN g.ttft_ms '
    f'ELSE GREATEST(0, floor(extract(epoch FROM %s::timestamptz - g.queued_at) * 1000))::integer END, '
    f'itl_ms = COALESCE(%s::double precision, g.itl_ms), '
    f'logprobs = CASE WHEN r.keeps_logprobs THEN %s::jsonb ELSE g.logprobs END, '
    f'details = COALESCE(%s::jsonb, g.details) '
    f'FROM r WHERE g.id = r.id RETURNING {_RUN.sql}), '
    # A continued reply's message already holds the text it carries on (empty otherwise).
    f'reply AS (UPDATE "{Message._meta.db_table}" m SET content = m.content || %s, '
    f'token_count = m.token_count + %s FROM r WHERE m.id = r.assistant_message_id), '
    f'settled AS ({settle_sql("r")}) '
    f'SELECT {_SAVED.sql}, p.name FROM saved s JOIN "{_POOLS}" p ON p.id = s.pool_id')
_TERMINAL = f'SELECT {_RUN.sql} FROM "{_RUNS}" g WHERE g.id = %s'


def _status_for(terminal: codec.Entry) -> str:
    if terminal.type == codec.ERROR:
        return GenerationRun.Status.FAILED
    if terminal.finish_reason == "cancelled":
        return GenerationRun.Status.CANCELLED
    return GenerationRun.Status.COMPLETED


def _ms_to_dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=dt_timezone.utc)


def run_finalize(*, run_id: int, also=None) -> GenerationRun | None:
    """Save the assistant message and the run's figures from the stream's text.

    Idempotent: a terminal run is returned unchanged. Returns None (and changes
    nothing) while the stream has no terminal entry yet. A stream with a gap in its
    seq fails the run (code stream_gap) with the text before the gap. `also(pipe)`:
    the caller's Redis commands, sent in the stream read's round trip."""
    reply = log.read(run_id, also=also)
    if reply.terminal is None:
        return None
    if reply.gap is not None:
        logger.error("run %s: %s", run_id, reply.gap.message)
    row = rows.fetch_one(_FINALIZE, _parameters(run_id, reply))
    if row is None:  # terminal already (or no such run)
        row = rows.fetch_one(_TERMINAL, [run_id])
        if row is None:
            raise GenerationRun.DoesNotExist(f"no run {run_id}")
        return _RUN.build(row)
    run, pool_name = rows.split(row, _SAVED)
    observe_latencies(pool_name, {"ttft": run.ttft_ms, "itl": run.itl_ms})
    return run


def run_end(*, run_id: int, lease_token: str, fields: dict) -> GenerationRun | None:
    """End a run that the caller's attempt holds and is not generating (a cancel of
    a queued run, a prompt that cannot fit, a broken stream): append `fields` as its
    terminal entry under the lease, then finalize. If the lease is no longer the
    caller's, whoever holds it ends the run, and this only finalizes what is there."""
    log.end(run_id=run_id, lease_token=lease_token, fields=fields)
    return run_finalize(run_id=run_id)


def _parameters(run_id: int, reply: Reply) -> list:
    """_FINALIZE's parameters for the run's stream as read."""
    terminal = reply.end
    prompt_tokens = error = first_token_at = itl_ms = None  # kept as they are
    if terminal.type == codec.DONE:
        finish_reason = terminal.finish_reason
        prompt_tokens = int(terminal.usage.get("prompt_tokens", 0))
    else:
        finish_reason, error = "error", f"{terminal.code}: {terminal.message}"
    if reply.first_token_ms is not None:
        first_token_at = _ms_to_dt(reply.first_token_ms)
        if reply.completion_tokens > 1:
            itl_ms = (reply.last_token_ms - reply.first_token_ms) / (reply.completion_tokens - 1)
    return [prompt_tokens, reply.completion_tokens, run_id,
            _status_for(terminal), timezone.now(), reply.completion_tokens, finish_reason, prompt_tokens, error,
            first_token_at, first_token_at, first_token_at, itl_ms, json.dumps(reply.logprobs or []),
            None if (details := reply.details) is None else json.dumps(details), reply.text, reply.completion_tokens]
