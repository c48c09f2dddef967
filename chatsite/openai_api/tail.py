"""Following one run's Redis stream from an async view, without blocking a thread.

XREAD BLOCK on the event loop's own async Redis client; new tokens only (a
redelivered attempt's repeated entries are skipped by `seq`, as finalize does),
ending with the terminal entry. A finished run whose stream has expired is
replayed from Postgres. Reading never starts or cancels a generation.
"""
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.conf import settings

from chatsite import redis_keys
from chatsite.redis_client import get_async_redis
from chatsite.runs import events
from chatsite.runs.models import GenerationRun

READ_COUNT = 1000


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
    so a streaming caller can send a comment and a dropped client is noticed."""
    r = get_async_redis()
    key = redis_keys.run_stream(run_id)
    block_ms = int(settings.CHATSITE["SSE_KEEPALIVE_SECONDS"] * 1000)
    last_id, next_seq = "0-0", 0
    while True:
        if next_seq == 0 and last_id == "0-0" and not await r.exists(key):
            replay = await sync_to_async(finished_run_entries)(run_id)
            if replay is not None:
                for entry in replay:
                    yield entry
                return
        result = await r.xread({key: last_id}, count=READ_COUNT, block=block_ms)
        if not result:
            yield None
            continue
        for entry_id, fields in result[0][1]:
            last_id = entry_id
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
