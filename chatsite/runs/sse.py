"""The REST SSE encoding of what the follower yields (GET /api/runs/{id}/events).

`id:` is the stream id, so Last-Event-ID resumes exactly. An entry is encoded once
per web process, however many clients read it (cached on the shared entry)."""
import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from json.encoder import encode_basestring_ascii as _json_str

from chatsite.runs.stream import codec
from chatsite.runs.stream.codec import Entry

RETRY = b"retry: 1000\n\n"
KEEPALIVE = b": keep-alive\n\n"


def frame(entry: Entry) -> bytes:
    wire = entry.wire
    if wire is None:
        wire = entry.wire = {}
    else:
        cached = wire.get("rest")
        if cached is not None:
            return cached
    if entry.type == codec.TOKEN:  # the hot path: a token frame without the generic encoder
        out = ('id: %s\nevent: token\ndata: {"seq": %d, "n": %d, "text": %s}\n\n'
               % (entry.id, entry.seq, entry.n, _json_str(entry.text))).encode()
    elif entry.type == codec.SNAPSHOT:  # its id, if any, is its last token's: a resume goes on after it
        head = "" if entry.id == codec.NO_ID else f"id: {entry.id}\n"
        out = f"{head}event: snapshot\ndata: {json.dumps({'text': entry.text, 'n': entry.n})}\n\n".encode()
    else:
        data = ({"finish_reason": entry.finish_reason, "usage": entry.usage} if entry.type == codec.DONE
                else {"code": entry.code, "message": entry.message})
        out = f"id: {entry.id}\nevent: {entry.type}\ndata: {json.dumps(data)}\n\n".encode()
    wire["rest"] = out
    return out


def frames(batch: list[Entry]) -> bytes:
    return b"".join(frame(e) for e in batch)


async def body(run_id: int, *, after: str | None, fresh: bool, outlet) -> AsyncIterator[bytes]:
    """A run's events after `after` as SSE bytes (a keep-alive comment each quiet
    interval), through `outlet` (chatsite.runs.outlet): ends after the terminal entry, or
    when the access ends. Both REST streams send it: GET .../events and a streamed POST.
    Closed (a client hung up as a frame was sent), it closes the follower at once: its hub
    subscription ends then, not when the collector gets to it."""
    async with aclosing(outlet.run(run_id, after=after, fresh=fresh)) as batches:
        async for batch in batches:
            yield KEEPALIVE if batch is None else frames(batch)


def event(name: str, data: dict) -> bytes:
    """An event with no id (resuming from Last-Event-ID skips nothing for it)."""
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
