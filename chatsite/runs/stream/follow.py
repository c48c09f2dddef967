"""The one follower: what a client of a run's stream is owed, for every surface.

REST SSE, the web page (through REST SSE) and the OpenAI-compatible endpoints all
format what `follow()` yields, so the rules live here once: resume after the
client's Last-Event-ID, or replace what the client has when the stream no longer
holds that id (its entries were lost and written again), skip repeated tokens and end
at a gap (codec.SeqCursor), hand back the terminal entry to a client that already had
it, and replay a finished run whose stream has expired from Postgres. Reading never
starts or cancels a run.
"""
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.conf import settings

from chatsite import redis_keys
from chatsite.redis_client import get_async_redis
from chatsite.runs.stream import codec
from chatsite.runs.stream.codec import GAP, REPEAT, TOKEN, Entry, SeqCursor
from chatsite.runs.stream.finished import finished_entries
from chatsite.runs.stream.hub import get_hub
from chatsite.runs.stream.log import rebuild


async def follow(run_id: int, *, after: str | None = None, keepalive: float | None = None,
                 fresh: bool = False, wait=None) -> AsyncIterator[list[Entry] | None]:
    """Batches of entries the client has not seen, the terminal entry last, then the end.

    `after` is the client's Last-Event-ID (None: from the start); if the stream does not
    hold it, the first batch is a SNAPSHOT of the reply so far, which replaces what the
    client has, then the rest follows as usual. Yields None after each quiet
    `keepalive` interval (default SSE_KEEPALIVE_SECONDS), so a streaming caller can
    send a keep-alive and a dropped client is noticed. A batch may hold a
    SNAPSHOT entry (an expired finished run's whole text, from Postgres) before the
    terminal. `fresh`: the caller knows the run is younger than the stream TTL, so
    its stream cannot have expired yet (no Postgres read at the start). `wait(sub,
    timeout)` replaces `sub.next(timeout)` (e.g. a revocation guard's); when it returns
    anything but a batch or None, following ends there. Raises HubError when Redis
    goes away."""
    key = redis_keys.run_stream(run_id)
    keepalive = settings.CHATSITE["SSE_KEEPALIVE_SECONDS"] if keepalive is None else keepalive
    r = get_async_redis()
    if not fresh and (finished := await _expired(r, key, run_id)) is not None:
        yield finished
        return
    cursor = SeqCursor()
    since = after or codec.NO_ID
    if since != codec.NO_ID:
        said, cursor.have, since = await _resume(r, key, run_id, since)
        if said:
            yield said
            if said[-1].is_terminal:
                return
    hub = get_hub()
    sub = await hub.subscribe(key, since, decode=codec.decode_flat)
    try:
        while True:
            batch = await (sub.next(keepalive) if wait is None else wait(sub, keepalive))
            if batch is not None and batch.__class__ is not list:
                return  # the caller's wait said stop (a revoked grant)
            if batch is None:
                if (finished := await _expired(r, key, run_id)) is not None:
                    yield finished
                    return
                yield None
                continue
            out = []
            for entry in batch:
                if entry.type == TOKEN:
                    verdict = cursor.accept(entry)
                    if verdict == REPEAT:
                        continue
                    if verdict == GAP:
                        out.append(cursor.gap_entry(entry))
                        yield out
                        return
                out.append(entry)
                if entry.is_terminal:
                    yield out
                    return
            if out:
                yield out
    finally:
        hub.unsubscribe(sub)


async def _expired(r, key: str, run_id: int) -> list[Entry] | None:
    """A finished run whose stream is gone, from Postgres; None otherwise."""
    if await r.exists(key):
        return None
    finished = await sync_to_async(finished_entries)(run_id)
    if finished is not None and await r.exists(key):
        return None  # no stream a moment ago, and now a finished run: it was just made; follow it
    return finished


async def _resume(r, key: str, run_id: int, after: str) -> tuple[list[Entry], int, str]:
    """Where a client resuming after stream id `after` stands: what it is told first (the
    end again, to a client that had it or dropped as it came; a SNAPSHOT replacing its
    text), how many tokens it then has, and the stream id to follow on from.

    A stream id names a position in one life of the stream: Redis makes ids from its
    clock, so a stream written again after its entries were lost (a Redis restart
    without persistence: the run starts over at token 0) never holds an id of the old
    one. An id the stream does not hold means the client's text is not (or no longer)
    this stream's: it is replaced, never added to."""
    for entry_id, fields in await r.xrange(key, min=after, max=after, count=1):
        at = codec.decode(entry_id, fields)
        return ([at], 0, after) if at.is_terminal else ([], at.seq + at.n, after)
    replaced = await _replacement(r, key, run_id)
    return replaced, replaced[0].n, replaced[0].id


async def _replacement(r, key: str, run_id: int) -> list[Entry]:
    """The reply so far as a SNAPSHOT that replaces what the client has (resumable after
    its last token entry), then the end if the stream has one; a finished run whose
    stream is gone comes from Postgres."""
    raw = await r.xrange(key)
    if not raw and (finished := await _expired(r, key, run_id)) is not None:
        return finished
    reply = rebuild([codec.decode(entry_id, fields) for entry_id, fields in raw])
    extra = {k: v for k, v in (reply.details or {}).items() if k != "cached_tokens"} or None
    snapshot = codec.snapshot_entry(text=reply.text, n=reply.completion_tokens, logprobs=reply.logprobs,
                                    entry_id=reply.last_token_id or codec.NO_ID, extra=extra)
    return [snapshot] if reply.end is None else [snapshot, reply.end]
