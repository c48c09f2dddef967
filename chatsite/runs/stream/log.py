"""The run log in Redis: fenced appends, the one terminal writer, reading back.

Every write, a step's token entries or the terminal entry, goes through one Lua
script that appends only for the attempt holding the run's lease (see lease.py):
a superseded attempt learns it from the script's answer at its next write and
writes nothing. The terminal entry is appended by that same script, which then
starts the stream's TTL and marks the lease ended, so it is the one terminal entry
and the last. A cancel is asked for by adding the run to one sorted set; the script
reports it to the writer in the same round trip.
"""
import time
from dataclasses import dataclass

from django.conf import settings

from chatsite import redis_keys
from chatsite.redis_client import database, get_redis
from chatsite.runs.stream import codec, lease
from chatsite.runs.stream.codec import GAP, NEW, REPEAT, Entry, SeqCursor
from chatsite.runs.stream.lease import is_ended

# KEYS[1] = the cancelled-runs set; KEYS[2i], KEYS[2i+1] = stream and lease of run i.
# ARGV[1] = TTL after the terminal entry; then per run: run id, lease token,
# #token-entry fields, fields..., #terminal-entry fields, fields...
# Answers per run: 0 not the lease holder (nothing written), 1 written, 2 written
# and a cancel is asked for.
_APPEND = """
local ttl, out, a = ARGV[1], {}, 2
for i = 2, #KEYS, 2 do
  local rid, token, nt = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
  local t0 = a + 3
  local nd = tonumber(ARGV[t0 + nt])
  local d0 = t0 + nt + 1
  a = d0 + nd
  local holder = redis.call('get', KEYS[i + 1])
  if holder == 'ended:' .. token then
    out[#out + 1] = 1  -- a retried call whose first try ended the run: nothing more to write
  elseif holder ~= token then
    out[#out + 1] = 0
  else
    if nt > 0 then redis.call('xadd', KEYS[i], '*', unpack(ARGV, t0, t0 + nt - 1)) end
    if nd > 0 then
      redis.call('xadd', KEYS[i], '*', unpack(ARGV, d0, d0 + nd - 1))
      redis.call('expire', KEYS[i], ttl)
      redis.call('set', KEYS[i + 1], 'ended:' .. token, 'EX', ttl)
      out[#out + 1] = 1
    elseif redis.call('zscore', KEYS[1], rid) then
      out[#out + 1] = 2
    else
      out[#out + 1] = 1
    end
  end
end
return out
"""
STALE, WRITTEN, CANCEL_ASKED = 0, 1, 2

_script = None


def _append_script():
    global _script
    if _script is None:
        _script = get_redis().register_script(_APPEND)
    return _script


def ttl_seconds() -> int:
    return settings.CHATSITE["STREAM_TTL_SECONDS"]


@dataclass(slots=True)
class Write:
    """What one attempt writes to its run's stream in one step: a token entry, the
    terminal entry, both, or neither (then the script only checks lease and cancel)."""

    run_id: int
    lease_token: str
    token: dict | None = None
    terminal: dict | None = None


def _flat(fields: dict | None) -> list:
    if not fields:
        return [0]
    flat = [str(x) for kv in fields.items() for x in kv]
    return [len(flat), *flat]


def append_args(writes: list[Write]) -> tuple[list, list]:
    """KEYS and ARGV of the append script for these writes (one call for all)."""
    keys, args = [redis_keys.cancelled_runs()], [ttl_seconds()]
    for w in writes:
        keys += [redis_keys.run_stream(w.run_id), redis_keys.run_lease(w.run_id)]
        args += [w.run_id, w.lease_token, *_flat(w.token), *_flat(w.terminal)]
    return keys, args


def append(writes: list[Write], *, client=None) -> list[int]:
    """Apply the writes in one round trip; per write STALE, WRITTEN or CANCEL_ASKED."""
    if not writes:
        return []
    keys, args = append_args(writes)
    return list(_append_script()(keys=keys, args=args, client=client or get_redis()))


def end(*, run_id: int, lease_token: str, fields: dict) -> bool:
    """Append the run's terminal entry as the attempt holding `lease_token`. True if
    written; False if that attempt no longer holds the run (someone else ends it)."""
    return append([Write(run_id, lease_token, terminal=fields)])[0] != STALE


# --- cancel -----------------------------------------------------------------------
def cancel_ask(run_id: int) -> None:
    """Ask the run's attempt to stop: its worker reads the ask with its next append (the
    record), and is told at once on the cancels channel (the push: it aborts the run before
    that append, and writes its end as the engine hands it back)."""
    ttl = ttl_seconds()
    now = time.time()
    r = get_redis()
    pipe = r.pipeline(transaction=False)
    pipe.zadd(redis_keys.cancelled_runs(), {str(run_id): now}, nx=True)  # an ask asked again keeps the first's time
    pipe.zremrangebyscore(redis_keys.cancelled_runs(), "-inf", now - ttl)  # no run lives that long
    pipe.publish(redis_keys.cancels_channel(database(r)), str(run_id))
    pipe.execute()


def cancel_asked(run_id: int) -> bool:
    return get_redis().zscore(redis_keys.cancelled_runs(), str(run_id)) is not None


# --- reading back -------------------------------------------------------------
@dataclass
class Reply:
    """The reply a stream spells under the seq rule."""

    text: str = ""
    completion_tokens: int = 0  # also the next seq to write
    terminal: Entry | None = None  # the stream's terminal entry, if written
    gap: Entry | None = None  # the error a gap in seq ends the reply with
    first_token_ms: int | None = None
    last_token_ms: int | None = None
    last_token_id: str | None = None
    exists: bool = False
    # One [token, logprob, top] per token taken, when the run's entries carry them
    # (a run that asked for log probabilities); None otherwise.
    logprobs: list | None = None
    # The entries' other details, when a run asked for them: "ids" (every token taken's),
    # and the prompt's ("prompt_ids", "prompt_text", "prompt_logprobs"); None otherwise.
    extra: dict | None = None

    @property
    def details(self) -> dict | None:
        """What the run's record keeps of the engine's report beyond the text: the
        entries' details, and the prompt tokens its prefix cache served; None when neither."""
        cached = int((self.terminal.usage if self.terminal is not None else {}).get("cached_tokens", 0))
        if not cached and not self.extra:
            return None
        return {**(self.extra or {}), **({"cached_tokens": cached} if cached else {})}

    @property
    def end(self) -> Entry | None:
        """How the reply ends: the gap's error if there is one, else the terminal entry."""
        return self.gap or self.terminal


def rebuild(entries: list[Entry]) -> Reply:
    """The reply the entries spell (text up to a gap, if any)."""
    reply = Reply(exists=bool(entries))
    cursor = SeqCursor()
    parts: list[str] = []
    for entry in entries:
        if entry.is_terminal:
            reply.terminal = reply.terminal or entry
            continue
        if reply.gap is not None:
            continue
        verdict = cursor.accept(entry)
        if verdict == REPEAT:
            continue
        if verdict == GAP:
            reply.gap = cursor.gap_entry(entry)
            continue
        assert verdict == NEW
        parts.append(entry.text)
        if entry.logprobs is not None:
            if reply.logprobs is None:
                reply.logprobs = []
            reply.logprobs.extend(entry.logprobs)
        if entry.extra:
            _take_extra(reply, entry.extra)
        reply.first_token_ms = reply.first_token_ms or entry.ms
        reply.last_token_ms = entry.ms
        reply.last_token_id = entry.id
    reply.text = "".join(parts)
    reply.completion_tokens = cursor.have
    return reply


def _take_extra(reply: Reply, extra: dict) -> None:
    if reply.extra is None:
        reply.extra = {}
    for key, value in extra.items():
        if key == "ids":
            reply.extra.setdefault("ids", []).extend(value)
        else:
            reply.extra.setdefault(key, value)


def discard(run_id: int) -> None:
    """Delete a finished run's stream before its TTL (its reply is not to be kept)."""
    get_redis().delete(redis_keys.run_stream(run_id))


def length(run_id: int) -> int:
    """How many entries the run's stream holds: about its tokens so far (one entry a token
    or a few), for an estimate that need not read them."""
    return get_redis().xlen(redis_keys.run_stream(run_id))


def entries(run_id: int) -> list[Entry]:
    """Every entry of the run's stream, in order ([] when the stream is gone)."""
    return [codec.decode(eid, f) for eid, f in get_redis().xrange(redis_keys.run_stream(run_id))]


def read(run_id: int, *, also=None) -> Reply:
    """The run's reply as its stream holds it. `also(pipe)` adds the caller's own
    commands to the same round trip (the worker's affinity pin), sent first."""
    if also is None:
        return rebuild(entries(run_id))
    pipe = get_redis().pipeline(transaction=False)
    also(pipe)
    pipe.xrange(redis_keys.run_stream(run_id))
    return rebuild([codec.decode(eid, f) for eid, f in pipe.execute()[-1]])


def acquire_reading(run_id: int, holder: str) -> tuple[str | None, Reply, bool]:
    """Take the run's lease for a new attempt (lease.acquire) and read what earlier
    attempts streamed and whether a cancel is asked, in one round trip: the attempt's
    token (None when another attempt holds the run or it has ended: the reads are then
    nobody's), the reply so far and the cancel. Only the lease holder writes the
    stream, so it stays as read; a cancel asked later reaches the writer's next append."""
    pipe = get_redis().pipeline(transaction=False)
    token = lease.acquire_in(pipe, run_id, holder)
    pipe.xrange(redis_keys.run_stream(run_id))
    pipe.zscore(redis_keys.cancelled_runs(), str(run_id))
    taken, raw, cancel = pipe.execute()
    return (token if taken else None), rebuild([codec.decode(eid, f) for eid, f in raw]), cancel is not None


def has_ended(run_id: int) -> bool:
    """Whether the run's terminal entry has been written (its lease is marked ended)."""
    return is_ended(get_redis().get(redis_keys.run_lease(run_id)))


def wait_ended(run_id: int, *, timeout: float) -> bool:
    """Whether the run's terminal entry is written within `timeout` seconds: woken by each
    new entry of its stream (a blocking read from its newest), not a poll."""
    r = get_redis()
    key = redis_keys.run_stream(run_id)
    deadline = time.monotonic() + timeout
    while True:
        pipe = r.pipeline(transaction=False)
        pipe.xrevrange(key, count=1)
        pipe.get(redis_keys.run_lease(run_id))
        newest, holder = pipe.execute()
        if is_ended(holder):  # the terminal entry and this mark are written in one script
            return True
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            return False
        r.xread({key: newest[0][0] if newest else "0-0"}, count=1, block=left_ms)
