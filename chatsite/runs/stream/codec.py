"""The run stream's entries, and the one rule every reader applies to their `seq`.

A run's stream `run:{id}` holds, in order: token entries `{type: token, seq, n,
text, attempt}`, where `seq` is the index of the entry's first token (contiguous
across entries and attempts) and `n` how many tokens it carries; then exactly one
terminal entry, `{type: done, finish_reason, usage}` or `{type: error, code,
message}`. Readers never trust a writer: they follow `seq` with a `SeqCursor`.
"""
import json
import re

TOKEN = "token"
DONE = "done"
ERROR = "error"
# Follower output only, never in Redis: the whole saved reply of a finished run whose
# stream has expired (it replaces whatever a client had shown).
SNAPSHOT = "snapshot"
TERMINAL_TYPES = (DONE, ERROR)

# The error code of a stream whose token entries skip a seq (entries lost, e.g. with a
# Redis that restarted without persistence): the reply ends there, as a failure.
GAP_CODE = "stream_gap"

NO_ID = "0-0"  # entries made from Postgres (snapshots) have no stream id

_STREAM_ID = re.compile(r"^\d{1,20}-\d{1,20}$")


def token_fields(*, seq: int, n: int, text: str, attempt: int) -> dict:
    return {"type": TOKEN, "seq": seq, "n": n, "text": text, "attempt": attempt}


def done_fields(*, finish_reason: str, prompt_tokens: int, completion_tokens: int) -> dict:
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    return {"type": DONE, "finish_reason": finish_reason, "usage": json.dumps(usage)}


def error_fields(*, code: str, message: str) -> dict:
    return {"type": ERROR, "code": code, "message": message}


class Entry:
    """One decoded entry. The hub hands the same object to every client following
    the run, so a surface may cache its encoding in `wire` (one encoding per entry,
    however many clients read it)."""

    __slots__ = ("id", "type", "seq", "n", "text", "attempt", "finish_reason", "usage", "code", "message", "wire")

    def __init__(self, id: str, type: str, *, seq: int = 0, n: int = 0, text: str = "", attempt: int = 0,
                 finish_reason: str = "", usage: dict | None = None, code: str = "", message: str = ""):
        self.id = id
        self.type = type
        self.seq = seq
        self.n = n
        self.text = text
        self.attempt = attempt
        self.finish_reason = finish_reason
        self.usage = usage or {}
        self.code = code
        self.message = message
        self.wire: dict = {}

    @property
    def is_terminal(self) -> bool:
        return self.type in TERMINAL_TYPES

    @property
    def ms(self) -> int:
        """When Redis stored it (the stream id's milliseconds); 0 for a snapshot."""
        return int(self.id.partition("-")[0])

    def __repr__(self) -> str:
        return f"Entry({self.id}, {self.type}, seq={self.seq}, n={self.n}, text={self.text[:20]!r})"


def decode(entry_id: str, fields: dict) -> Entry:
    """An entry as Redis returns it. Anything that is not a token or done entry is an error entry."""
    kind = fields.get("type", "")
    if kind == TOKEN:
        return Entry(entry_id, TOKEN, seq=int(fields["seq"]), n=int(fields["n"]), text=fields.get("text", ""),
                     attempt=int(fields.get("attempt", 0)))
    if kind == DONE:
        return Entry(entry_id, DONE, finish_reason=fields.get("finish_reason", ""),
                     usage=json.loads(fields.get("usage") or "{}"))
    return Entry(entry_id, ERROR, code=fields.get("code", "error"), message=fields.get("message", ""))


def done_entry(*, finish_reason: str, prompt_tokens: int, completion_tokens: int, entry_id: str = NO_ID) -> Entry:
    return Entry(entry_id, DONE, finish_reason=finish_reason,
                 usage={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens})


def error_entry(*, code: str, message: str, entry_id: str = NO_ID) -> Entry:
    return Entry(entry_id, ERROR, code=code, message=message)


def snapshot_entry(*, text: str, n: int) -> Entry:
    return Entry(NO_ID, SNAPSHOT, seq=0, n=n, text=text)


# --- the seq rule -------------------------------------------------------------
NEW, REPEAT, GAP = "new", "repeat", "gap"


class SeqCursor:
    """How many tokens a reader has taken, and what the next token entry is to it.

    One rule for every reader (finalize, the worker continuing a run, the web page,
    every SSE surface): an entry wholly before the cursor repeats tokens already
    taken (a write retried across a Redis hiccup) and is skipped; an entry starting
    at the cursor is new; anything else is a gap, and the reply ends there with
    `gap_entry()` as its terminal."""

    __slots__ = ("have",)

    def __init__(self, have: int = 0):
        self.have = have

    def accept(self, entry: Entry) -> str:
        if entry.seq + entry.n <= self.have:
            return REPEAT
        if entry.seq != self.have:
            return GAP
        self.have += entry.n
        return NEW

    def gap_entry(self, entry: Entry) -> Entry:
        return error_entry(code=GAP_CODE, entry_id=entry.id,
                           message=f"the reply's token stream skips from token {self.have} to {entry.seq} "
                                   "(entries were lost); the reply ends here")


# --- stream ids -----------------------------------------------------------------
def is_valid_stream_id(value: str) -> bool:
    """Whether a client's Last-Event-ID is a well-formed stream id (two unsigned
    64-bit numbers: Redis refuses larger ones)."""
    return bool(_STREAM_ID.match(value)) and all(int(part) < 2**64 for part in value.split("-"))


def stream_id_key(value: str) -> tuple[int, int]:
    """A stream id ("ms-seq", or "ms") as a tuple that orders like Redis orders ids."""
    ms, _, seq = value.partition("-")
    return int(ms), int(seq or 0)
