"""Finalize: the durable record, rebuilt from the run's own stream.

Every run ends here, once, so it is written in four plain SQL statements (lock and
read, the run, its message, the tenant's usage): the ORM's query compilation cost
more CPU than the rest of the finalize (bench/lifecycle_cpu.py)."""
import json
import logging
from datetime import datetime, timezone as dt_timezone

from django.db import connection, transaction
from django.utils import timezone

from chatsite import rows
from chatsite.chats.models import Message
from chatsite.metrics.counters import observe_latencies
from chatsite.quotas.models import TenantQuota
from chatsite.quotas.services import quota_settle
from chatsite.runs.models import GenerationRun
from chatsite.runs.stream import codec, log
from chatsite.runs.stream.log import Reply

logger = logging.getLogger(__name__)

_RUNS = GenerationRun._meta.db_table
# The run's columns but its prompt snapshot (it can be the chat's last 200 messages and
# finalize does not read it), its pool's name and its tenant's budget period. FOR UPDATE
# OF the run only: locking the pool and tenant rows the join reads deadlocked with
# admissions inserting runs that reference them.
_RUN = rows.Columns(GenerationRun, "r", exclude=("prompt_snapshot",))
_LOCK = rows.prepared(
    f'SELECT {_RUN.sql}, p.name, q.period FROM "{_RUNS}" r '
    f'JOIN "{GenerationRun._meta.get_field("pool").related_model._meta.db_table}" p ON p.id = r.pool_id '
    f'LEFT JOIN "{TenantQuota._meta.db_table}" q ON q.tenant_id = r.tenant_id WHERE r.id = %s FOR UPDATE OF r')
_SAVED = ("status", "finished_at", "completion_tokens", "finish_reason", "prompt_tokens", "error",
          "first_token_at", "ttft_ms", "itl_ms", "logprobs")
_SAVE_RUN = rows.prepared(
    f'UPDATE "{_RUNS}" SET {", ".join(f"{name} = %s" for name in _SAVED[:-1])}, logprobs = %s::jsonb '
    f'WHERE id = %s')
_SAVE_REPLY = rows.prepared(
    f'UPDATE "{Message._meta.db_table}" SET content = content || %s, token_count = token_count + %s '
    f'WHERE id = %s')


def _status_for(terminal: codec.Entry) -> str:
    if terminal.type == codec.ERROR:
        return GenerationRun.Status.FAILED
    if terminal.finish_reason == "cancelled":
        return GenerationRun.Status.CANCELLED
    return GenerationRun.Status.COMPLETED


def _ms_to_dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=dt_timezone.utc)


def run_finalize(*, run_id: int) -> GenerationRun | None:
    """Save the assistant message and the run's figures from the stream's text.

    Idempotent: a terminal run is returned unchanged. Returns None (and changes
    nothing) while the stream has no terminal entry yet. A stream with a gap in its
    seq fails the run (code stream_gap) with the text before the gap."""
    reply = log.read(run_id)
    if reply.terminal is None:
        return None
    if reply.gap is not None:
        logger.error("run %s: %s", run_id, reply.gap.message)
    with transaction.atomic():
        row = rows.fetch_one(_LOCK, [run_id])
        if row is None:
            raise GenerationRun.DoesNotExist(f"no run {run_id}")
        run, pool_name, period = rows.split(row, _RUN)
        if run.is_terminal:
            return run
        _apply(run, reply)
        quota_settle(run=run, period=period or TenantQuota.Period.MONTH)
    observe_latencies(pool_name, {"ttft": run.ttft_ms, "itl": run.itl_ms})
    return run


def run_end(*, run_id: int, lease_token: str, fields: dict) -> GenerationRun | None:
    """End a run that the caller's attempt holds and is not generating (a cancel of
    a queued run, a prompt that cannot fit, a broken stream): append `fields` as its
    terminal entry under the lease, then finalize. If the lease is no longer the
    caller's, whoever holds it ends the run, and this only finalizes what is there."""
    log.end(run_id=run_id, lease_token=lease_token, fields=fields)
    return run_finalize(run_id=run_id)


def _apply(run: GenerationRun, reply: Reply) -> None:
    terminal = reply.end
    run.status = _status_for(terminal)
    run.finished_at = timezone.now()
    run.completion_tokens = reply.completion_tokens
    if terminal.type == codec.DONE:
        run.finish_reason = terminal.finish_reason
        run.prompt_tokens = int(terminal.usage.get("prompt_tokens", 0))
    else:
        run.finish_reason = "error"
        run.error = f"{terminal.code}: {terminal.message}"
    if reply.first_token_ms is not None:
        run.first_token_at = _ms_to_dt(reply.first_token_ms)
        run.ttft_ms = max(0, int((run.first_token_at - run.queued_at).total_seconds() * 1000))
        if reply.completion_tokens > 1:
            run.itl_ms = (reply.last_token_ms - reply.first_token_ms) / (reply.completion_tokens - 1)
    if run.sampling.get("logprobs") is not None:  # asked for: kept for answers re-read from Postgres
        run.logprobs = reply.logprobs or []
    values = [getattr(run, name) for name in _SAVED[:-1]]
    with connection.cursor() as cur:
        cur.execute(_SAVE_RUN, [*values, None if run.logprobs is None else json.dumps(run.logprobs), run.pk])
        # A continued reply's message already holds the text it carries on (empty otherwise).
        cur.execute(_SAVE_REPLY, [reply.text, reply.completion_tokens, run.assistant_message_id])
