"""The one follower: what a client of a run's stream is owed, for every surface.

REST SSE, the web page (through REST SSE) and the OpenAI-compatible endpoints all
format what `follow()` yields, so the rules live here once: resume after the
client's Last-Event-ID, skip repeated tokens and end at a gap (codec.SeqCursor),
hand back the terminal entry to a client that already had it, and replay a finished
run whose stream has expired from Postgres. Reading never starts or cancels a run.
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


async def follow(run_id: int, *, after: str | None = None, keepalive: float | None = None,
                 fresh: bool = False, wait=None) -> AsyncIterator[list[Entry] | None]:
    """Batches of entries the client has not seen, the terminal entry last, then the end.

    `after` is the client's Last-Event-ID (None: from the start). Yields None after
    each quiet `keepalive` interval (default SSE_KEEPALIVE_SECONDS), so a streaming
    caller can send a keep-alive and a dropped client is noticed. A batch may hold a
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
    if after is not None and after != codec.NO_ID:
        had, ended = await _position(r, key, after)
        if ended is not None:  # the client had the end (or dropped as it came): say it again
            yield [ended]
            return
        cursor.have = had
    hub = get_hub()
    sub = await hub.subscribe(key, after or codec.NO_ID, decode=codec.decode_flat)
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


async def _position(r, key: str, after: str) -> tuple[int, Entry | None]:
    """How many tokens the client had at stream id `after`, and the terminal entry if
    the client is at or past it."""
    for entry_id, fields in await r.xrevrange(key, max=after, count=1):
        entry = codec.decode(entry_id, fields)
        if entry.is_terminal:
            return 0, entry
        return entry.seq + entry.n, None
    return 0, None
