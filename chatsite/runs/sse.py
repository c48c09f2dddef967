"""The REST SSE encoding of what the follower yields (GET /api/runs/{id}/events).

`id:` is the stream id, so Last-Event-ID resumes exactly. An entry is encoded once
per web process, however many clients read it (cached on the shared entry)."""
import json

from chatsite.runs.stream import codec
from chatsite.runs.stream.codec import Entry

RETRY = b"retry: 1000\n\n"
KEEPALIVE = b": keep-alive\n\n"


def frame(entry: Entry) -> bytes:
    cached = entry.wire.get("rest")
    if cached is not None:
        return cached
    if entry.type == codec.TOKEN:
        data = {"seq": entry.seq, "n": entry.n, "text": entry.text}
    elif entry.type == codec.SNAPSHOT:  # no id: the client's old ids are gone with the stream
        out = f"event: snapshot\ndata: {json.dumps({'text': entry.text, 'n': entry.n})}\n\n".encode()
        entry.wire["rest"] = out
        return out
    elif entry.type == codec.DONE:
        data = {"finish_reason": entry.finish_reason, "usage": entry.usage}
    else:
        data = {"code": entry.code, "message": entry.message}
    out = f"id: {entry.id}\nevent: {entry.type}\ndata: {json.dumps(data)}\n\n".encode()
    entry.wire["rest"] = out
    return out


def frames(batch: list[Entry]) -> bytes:
    return b"".join(frame(e) for e in batch)
