"""The run stream's entries, and the one rule every reader applies to their `seq`.

A run's stream `run:{id}` holds, in order: token entries, then exactly one terminal
entry. Each entry is one field, so Redis, the writer and every reader handle two
strings per entry instead of ten:
- a token entry `t` = "SEQ N ATTEMPT TEXT": `SEQ` is the index of its first token
  (contiguous across entries and attempts), `N` how many tokens it carries, `TEXT`
  their text (the rest of the value, spaces and all);
- a token entry of a run that asked for per-token details, `p` = "SEQ N ATTEMPT JSON"
  with JSON = [TEXT, LOGPROBS] or [TEXT, LOGPROBS, EXTRA]: LOGPROBS null (not asked
  for) or [[token, logprob, [[alt, logprob], ...]], ...] (one per token), EXTRA an
  object of what else the run asked for: "ids" (the tokens' ids) and, in the entry of
  seq 0 only, "prompt_ids" and "prompt_logprobs" (null for the prompt's first token,
  then one [token, logprob, [[alt, logprob], ...]] each). The same token entry to every
  reader, with `logprobs` and `extra` set. Only such runs pay for JSON; a `t` entry
  stays a split and two ints;
- the terminal entry, `d` = {"finish_reason", "usage"} (JSON) when the run is done, or
  `e` = {"code", "message"} (JSON) when it failed. `usage` has "prompt_tokens" and
  "completion_tokens", and "cached_tokens" (the prompt tokens the engine's prefix
  cache served) when there were any.
Readers never trust a writer: they follow `seq` with a `SeqCursor`.
"""
import json
import re

TOKEN = "token"
DONE = "done"
ERROR = "error"
# Follower output only, never in Redis: the whole reply so far, which replaces whatever a
# client had shown (a finished run whose stream has expired, from Postgres; or a client
# resuming from a position the stream no longer holds, see follow.py).
SNAPSHOT = "snapshot"
TERMINAL_TYPES = (DONE, ERROR)

# The one field of each kind of entry.
TOKEN_FIELD, DONE_FIELD, ERROR_FIELD = "t", "d", "e"
LOGPROBS_TOKEN_FIELD = "p"  # a token entry with its tokens' log probabilities

# The error code of a stream whose token entries skip a seq (entries lost, e.g. with a
# Redis that restarted without persistence): the reply ends there, as a failure.
GAP_CODE = "stream_gap"
# The error code of a run whose request the engine refused as the client's mistake (a
# grammar it cannot compile, a token id outside its vocabulary): a 400 to a /v1 client.
REFUSED_CODE = "invalid_request"

NO_ID = "0-0"  # entries made from Postgres (snapshots) have no stream id



def _at_most(top: int) -> str:
    """A regular expression of the decimal numbers 0..top (leading zeros allowed, no
    longer than top): what a JSON Schema pattern can say of a number in a string."""
    digits = str(top)
    alternatives = [f"[0-9]{{1,{len(digits) - 1}}}"]
    for i, digit in enumerate(digits):
        rest = len(digits) - i - 1
        if digit != "0":
            alternatives.append(digits[:i] + f"[0-{int(digit) - 1}]" + (f"[0-9]{{{rest}}}" if rest else ""))
    return "(?:" + "|".join(alternatives + [digits]) + ")"


# A stream id: two unsigned 64-bit numbers (Redis refuses larger ones); the schema states it.
STREAM_ID_PATTERN = f"^{_at_most(2**64 - 1)}-{_at_most(2**64 - 1)}$"
_STREAM_ID = re.compile(STREAM_ID_PATTERN)


def token_value(*, seq: int, n: int, text: str, attempt: int) -> str:
    return f"{seq} {n} {attempt} {text}"


def token_fields(*, seq: int, n: int, text: str, attempt: int) -> dict:
    return {TOKEN_FIELD: token_value(seq=seq, n=n, text=text, attempt=attempt)}


def logprobs_token_fields(*, seq: int, n: int, text: str, attempt: int, logprobs: list | None,
                          extra: dict | None = None) -> dict:
    """A token entry carrying `logprobs` (one [token, logprob, [[alt, logprob], ...]] per
    token, or None when the run did not ask for them) and `extra` (token ids, the prompt's
    details), if any."""
    payload = json.dumps([text, logprobs, extra] if extra else [text, logprobs], ensure_ascii=False,
                         separators=(",", ":"))
    return {LOGPROBS_TOKEN_FIELD: f"{seq} {n} {attempt} {payload}"}


def done_fields(*, finish_reason: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> dict:
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    if cached_tokens:
        usage["cached_tokens"] = cached_tokens
    return {DONE_FIELD: json.dumps({"finish_reason": finish_reason, "usage": usage})}


def error_fields(*, code: str, message: str) -> dict:
    return {ERROR_FIELD: json.dumps({"code": code, "message": message})}


class Entry:
    """One decoded entry. The hub hands the same object to every client following
    the run, so a surface may cache its encoding in `wire` (a dict made on first use:
    one encoding per entry, however many clients read it). No __slots__: attributes
    not set on an entry read the class defaults, so a token entry is cheap to make."""

    seq = 0
    n = 0
    text = ""
    attempt = 0
    finish_reason = ""
    usage: dict = {}
    code = ""
    message = ""
    logprobs: list | None = None  # a token (or snapshot) entry of a run that asked for them
    extra: dict | None = None  # a token entry's other details (token ids, the prompt's), if asked for
    wire: dict | None = None

    def __init__(self, id: str, type: str, *, seq: int = 0, n: int = 0, text: str = "", attempt: int = 0,
                 finish_reason: str = "", usage: dict | None = None, code: str = "", message: str = "",
                 logprobs: list | None = None):
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
        self.logprobs = logprobs

    @property
    def is_terminal(self) -> bool:
        return self.type in TERMINAL_TYPES

    @property
    def ms(self) -> int:
        """When Redis stored it (the stream id's milliseconds); 0 for a snapshot."""
        return int(self.id.partition("-")[0])

    def __repr__(self) -> str:
        return f"Entry({self.id}, {self.type}, seq={self.seq}, n={self.n}, text={self.text[:20]!r})"


_new = object.__new__


def _token(entry_id: str, seq: int, n: int, text: str, attempt: int) -> Entry:
    e = _new(Entry)
    e.id, e.type, e.seq, e.n, e.text, e.attempt = entry_id, TOKEN, seq, n, text, attempt
    return e


def _decode_one(entry_id: str, field: str, value: str) -> Entry:
    if field == TOKEN_FIELD:
        seq, n, attempt, text = value.split(" ", 3)
        return _token(entry_id, int(seq), int(n), text, int(attempt))
    if field == LOGPROBS_TOKEN_FIELD:
        seq, n, attempt, payload = value.split(" ", 3)
        text, logprobs, *extra = json.loads(payload)
        e = _token(entry_id, int(seq), int(n), text, int(attempt))
        e.logprobs = logprobs
        if extra:
            e.extra = extra[0]
        return e
    if field == DONE_FIELD:
        data = json.loads(value)
        return Entry(entry_id, DONE, finish_reason=data.get("finish_reason", ""), usage=data.get("usage") or {})
    data = json.loads(value) if field == ERROR_FIELD else {"code": "stream_corrupt",
                                                          "message": f"unknown stream entry field {field!r}"}
    return Entry(entry_id, ERROR, code=data.get("code", "error"), message=data.get("message", ""))


def decode(entry_id: str, fields: dict) -> Entry:
    """An entry as redis-py returns it (a dict of its one field)."""
    for field, value in fields.items():
        return _decode_one(entry_id, field, value)
    return _decode_one(entry_id, "", "")


def decode_flat(entry_id: str, flat: list) -> Entry:
    """An entry as XREAD returns it unparsed ([field, value]); the hub reads it this way."""
    return _decode_one(entry_id, flat[0], flat[1])


def done_entry(*, finish_reason: str, prompt_tokens: int, completion_tokens: int, entry_id: str = NO_ID,
               cached_tokens: int = 0) -> Entry:
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    if cached_tokens:
        usage["cached_tokens"] = cached_tokens
    return Entry(entry_id, DONE, finish_reason=finish_reason, usage=usage)


def error_entry(*, code: str, message: str, entry_id: str = NO_ID) -> Entry:
    return Entry(entry_id, ERROR, code=code, message=message)


def snapshot_entry(*, text: str, n: int, logprobs: list | None = None, entry_id: str = NO_ID,
                   extra: dict | None = None) -> Entry:
    """The reply's first `n` tokens, in place of what a client had. `entry_id`: the stream
    id of the last token entry it covers (a client resumes after it), NO_ID for none.
    `extra`: the details its entries carried (token ids, a prompt's log-probabilities)."""
    entry = Entry(entry_id, SNAPSHOT, seq=0, n=n, text=text, logprobs=logprobs)
    entry.extra = extra
    return entry


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
    """Whether a client's Last-Event-ID is a well-formed stream id (STREAM_ID_PATTERN)."""
    return _STREAM_ID.fullmatch(value) is not None


def stream_id_key(value: str) -> tuple[int, int]:
    """A stream id ("ms-seq", or "ms") as a tuple that orders like Redis orders ids."""
    ms, _, seq = value.partition("-")
    return int(ms), int(seq or 0)
