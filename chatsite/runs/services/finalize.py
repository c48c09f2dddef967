"""Finalize: the durable record, rebuilt from the run's own stream.

Every run ends here, once: the stream read back, then one store call
(chatsite.runs.store.finalize) that saves the run's figures, its reply's text and the
tenant's usage in one round trip. A run whose end finds messages queued in its chat sends
`queue_waiting` once its transaction commits: the queue's service starts the next one.
A signal, not a call: that service admits through the door, which finalizes a reply it
finds ended but not yet saved (chatsite.runs.apps connects the two)."""
import json
import logging
from dataclasses import replace
from datetime import datetime, timezone as dt_timezone

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from chatsite import stage_trace
from chatsite.counters import observe_latencies
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.queued import steering
from chatsite.runs.store import finalize as store
from chatsite.runs.stream import codec, log
from chatsite.runs.stream.log import Reply
from inference.token_prefix import TokenRecord

logger = logging.getLogger(__name__)

# Sent with chat_id and run_id after the commit of a run's end that found messages queued in its chat;
# after, so that an ending inside another admission (the door's) never starts the queue inside it.
queue_waiting = Signal()


def _status_for(terminal: codec.Entry) -> str:
    if terminal.type == codec.ERROR:
        return GenerationRun.Status.FAILED
    if terminal.finish_reason == "cancelled":
        return GenerationRun.Status.CANCELLED
    return GenerationRun.Status.COMPLETED


def _ms_to_dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=dt_timezone.utc)


def run_finalize_if_ended(*, run_id: int) -> bool:
    """Save a run whose stream has ended but whose worker has not saved it yet (the terminal
    entry comes first: a client can act on a reply's end before it is saved); False, changing
    nothing, while its stream goes on."""
    if not log.has_ended(run_id):
        return False
    run_finalize(run_id=run_id)
    return True


def run_finalize(*, run_id: int, also=None, tokens: TokenRecord | None = None) -> str | None:
    """Save the assistant message and the run's figures from the stream's text, and
    `tokens` (the ids its engine held at the reply's end: its worker's) if it completed or
    was stopped, even when another finalize ended it first. Returns the run's status as
    saved (a terminal one).

    Idempotent: a terminal run is left unchanged. Returns None (and changes
    nothing) while the stream has no terminal entry yet. A stream with a gap in its
    seq fails the run (code stream_gap) with the text before the gap. `also(pipe)`:
    the caller's Redis commands, sent in the stream read's round trip."""
    reply = log.read(run_id, also=also)
    if reply.terminal is None:
        return None
    if reply.gap is not None:
        logger.error("run %s: %s", run_id, reply.gap.message)
    ending = _ending(reply)
    if ending.finish_reason == "cancelled" and steering.is_awaited(run_id):
        # A send now stops it (queued.send_now, which asks the stop before it names the run on its message).
        ending = replace(ending, finish_reason="interrupted")
    finished = store.run_finish(run_id=run_id, ending=ending, tokens=tokens)
    if finished is None:  # terminal already (or no such run)
        status = store.run_status(run_id=run_id)
        if status is None:
            raise GenerationRun.DoesNotExist(f"no run {run_id}")
        return status
    stage_trace.mark("finalize.saved", run_id)
    observe_latencies(finished.pool_name, {"ttft": finished.ttft_ms, "itl": finished.itl_ms})
    if finished.queue_waiting:  # every ending (completed, stopped, failed, swept) passes here once
        chat_id = finished.chat_id
        transaction.on_commit(lambda: queue_waiting.send(sender=GenerationRun, chat_id=chat_id, run_id=run_id))
    return finished.status


def run_end(*, run_id: int, lease_token: str, fields: dict) -> str | None:
    """End a run that the caller's attempt holds and is not generating (a cancel of
    a queued run, a prompt that cannot fit, a broken stream): append `fields` as its
    terminal entry under the lease, then finalize. If the lease is no longer the
    caller's, whoever holds it ends the run, and this only finalizes what is there."""
    log.end(run_id=run_id, lease_token=lease_token, fields=fields)
    return run_finalize(run_id=run_id)


def _ending(reply: Reply) -> store.Ending:
    """The run's end as its stream tells it (a failed run keeps admission's prompt
    tokens, a run with no token its timings)."""
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
    return store.Ending(status=_status_for(terminal), finished_at=timezone.now(), finish_reason=finish_reason,
                        completion_tokens=reply.completion_tokens, prompt_tokens=prompt_tokens, error=error,
                        first_token_at=first_token_at, itl_ms=itl_ms, logprobs=json.dumps(reply.logprobs or []),
                        details=None if (details := reply.details) is None else json.dumps(details), text=reply.text)
