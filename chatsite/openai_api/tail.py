"""Following one run's Redis stream from an async view, without blocking a thread.

Through the web process's stream hub (chatsite.runs.stream_hub: one XREAD BLOCK
on the event loop for every followed stream, shared with the SSE consumer); new
tokens only (a redelivered attempt's repeated entries are skipped by `seq`, as
finalize does), ending with the terminal entry. A finished run whose stream has
expired is replayed from Postgres. Reading never starts or cancels a generation.
"""
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.conf import settings

from chatsite import redis_keys
from chatsite.redis_client import get_async_redis
from chatsite.runs import events
from chatsite.runs.models import GenerationRun
from chatsite.runs.stream_hub import get_hub


def finished_run_entries(run_id: int) -> list[events.Entry] | None:
    """A finished run as entries (its whole text, then its terminal), from Postgres;
    None while it is not finished."""
    run = GenerationRun.objects.select_related("assistant_message").filter(pk=run_id).first()
    if run is None or not run.is_terminal:
        return None
    text = events.Entry("0-0", events.TOKEN, seq=0, n=run.completion_tokens, text=run.assistant_message.content)
    if run.status == GenerationRun.Status.FAILED:
        code, _, message = run.error.partition(": ")
        terminal = events.Entry("0-0", events.ERROR, code=code or "error", message=message or run.error)
    else:
        terminal = events.Entry("0-0", events.DONE, finish_reason=run.finish_reason,
                                usage={"prompt_tokens": run.prompt_tokens, "completion_tokens": run.completion_tokens})
    return ([text] if text.text else []) + [terminal]


async def follow(run_id: int) -> AsyncIterator[events.Entry | None]:
    """The run's entries from the start: token entries carrying new text, then the
    terminal entry, then the end. Yields None after each quiet keep-alive interval,
    so a streaming caller can send a comment and a dropped client is noticed.
    Raises HubError when Redis goes away."""
    key = redis_keys.run_stream(run_id)
    keepalive = settings.CHATSITE["SSE_KEEPALIVE_SECONDS"]
    next_seq = 0
    replay = await _replay_if_expired(key, run_id)
    if replay is not None:
        for entry in replay:
            yield entry
        return
    hub = get_hub()
    sub = await hub.subscribe(key, "0-0")
    try:
        while True:
            batch = await sub.next(keepalive)
            if batch is None:
                replay = await _replay_if_expired(key, run_id) if next_seq == 0 else None
                for entry in replay or [None]:
                    yield entry
                if replay is not None:
                    return
                continue
            for entry_id, fields in batch:
                entry = events.decode(entry_id, fields)
                if entry.is_terminal:
                    yield entry
                    return
                if entry.seq + entry.n <= next_seq:
                    continue  # already seen: a later attempt repeating tokens
                if entry.seq != next_seq:
                    yield events.Entry(entry_id, events.ERROR, code="stream_corrupt",
                                       message=f"the token stream skips from {next_seq} to {entry.seq}")
                    return
                next_seq += entry.n
                yield entry
    finally:
        hub.unsubscribe(sub)


async def _replay_if_expired(key: str, run_id: int) -> list[events.Entry] | None:
    if await get_async_redis().exists(key):
        return None
    return await sync_to_async(finished_run_entries)(run_id)
