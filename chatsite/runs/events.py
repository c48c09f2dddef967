"""The encoding of stream entries and of the SSE frames that carry them.

A run's stream holds, in order: token entries `{type: token, seq, n, text, attempt}`
where `seq` is the index of the entry's first token (contiguous across entries and
attempts) and `n` how many tokens it carries; then exactly one terminal entry,
`{type: done, finish_reason, usage}` or `{type: error, code, message}`.
"""
import json
import re
from dataclasses import dataclass, field

TOKEN = "token"
DONE = "done"
ERROR = "error"
SNAPSHOT = "snapshot"  # SSE only: the whole saved reply of a run whose stream expired
TERMINAL_TYPES = (DONE, ERROR)

_STREAM_ID = re.compile(r"^\d{1,20}-\d{1,20}$")


def token_fields(*, seq: int, n: int, text: str, attempt: int) -> dict:
    return {"type": TOKEN, "seq": seq, "n": n, "text": text, "attempt": attempt}


def done_fields(*, finish_reason: str, prompt_tokens: int, completion_tokens: int) -> dict:
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    return {"type": DONE, "finish_reason": finish_reason, "usage": json.dumps(usage)}


def error_fields(*, code: str, message: str) -> dict:
    return {"type": ERROR, "code": code, "message": message}


@dataclass
class Entry:
    """One decoded stream entry."""

    id: str
    type: str
    seq: int = 0
    n: int = 0
    text: str = ""
    attempt: int = 0
    finish_reason: str = ""
    usage: dict = field(default_factory=dict)
    code: str = ""
    message: str = ""

    @property
    def is_terminal(self) -> bool:
        return self.type in TERMINAL_TYPES


def decode(entry_id: str, fields: dict) -> Entry:
    kind = fields.get("type", "")
    if kind == TOKEN:
        return Entry(entry_id, kind, seq=int(fields["seq"]), n=int(fields["n"]),
                     text=fields.get("text", ""), attempt=int(fields.get("attempt", 0)))
    if kind == DONE:
        return Entry(entry_id, kind, finish_reason=fields.get("finish_reason", ""),
                     usage=json.loads(fields.get("usage") or "{}"))
    return Entry(entry_id, ERROR, code=fields.get("code", "error"), message=fields.get("message", ""))


def is_valid_stream_id(value: str) -> bool:
    """Whether a client's Last-Event-ID is a well-formed stream id (two unsigned
    64-bit numbers: Redis refuses larger ones)."""
    return bool(_STREAM_ID.match(value)) and all(int(part) < 2**64 for part in value.split("-"))


def stream_id_key(value: str) -> tuple[int, int]:
    """A stream id ("ms-seq", or "ms") as a tuple that orders like Redis orders ids."""
    ms, _, seq = value.partition("-")
    return int(ms), int(seq or 0)


def sse_frame(entry: Entry) -> bytes:
    """One SSE event; `id:` is the stream id, so Last-Event-ID resumes exactly."""
    if entry.type == TOKEN:
        data = {"seq": entry.seq, "n": entry.n, "text": entry.text}
    elif entry.type == DONE:
        data = {"finish_reason": entry.finish_reason, "usage": entry.usage}
    else:
        data = {"code": entry.code, "message": entry.message}
    return f"id: {entry.id}\nevent: {entry.type}\ndata: {json.dumps(data)}\n\n".encode()


def sse_snapshot(*, text: str, completion_tokens: int, terminal: Entry) -> bytes:
    """A finished run served from Postgres: the whole reply, then its terminal event.

    The snapshot replaces whatever the client had shown (its stream ids are gone)."""
    snap = json.dumps({"text": text, "n": completion_tokens})
    return f"event: {SNAPSHOT}\ndata: {snap}\n\n".encode() + sse_frame(terminal)


def sse_comment(text: str = "keep-alive") -> bytes:
    return f": {text}\n\n".encode()
