"""What an open SSE stream costs its user, and how it learns it must end.

A stream holds a slot in its user's set of open streams (one sorted set per user
and tenant, scored by when the slot expires): at most SSE_MAX_STREAMS_PER_USER,
one more is refused with 429 and Retry-After. The slot is refreshed at every
check and expires on its own a few checks later, so a stream whose process died
without closing it frees its slot within SLOT_TTL seconds.

Every SSE_REVOCATION_CHECK_SECONDS (whether tokens flow or the run is quiet) the
stream refreshes its slot and reads its grant's revocation markers in the same
single Redis call; a revoked (or too old) grant ends the stream. No database, unless
that call finds that Redis lost the markers (no `revoked:loaded`): they are written
again from Postgres first (revocation.revocations_reload), and read again.

A share link's viewer (no account: `grant.share_id`) holds a slot of the link's own
set instead, at most SHARE_MAX_STREAMS_PER_LINK, and its markers (the link's among
them) are read every SHARE_REVOCATION_CHECK_SECONDS: a revoked link ends its viewers
within about a second.

A request that waits for a whole reply holds no slot (`StreamGuard.watching`): it
only checks its grant's markers, at the same interval.

chatsite.runs.outlet is the one caller: `StreamGuard.admit(grant)` at start (or
`admit_sync` from a request's thread), `guard.next(sub, t)` in place of
`sub.next(t)` (returns REVOKED when the stream must end), and `guard.close()` when
the stream ends.
"""
import asyncio
import contextlib
import logging
import math
import secrets
import time
import weakref

from django.conf import settings

from chatsite import redis_keys
from chatsite.errors import RateLimited
from chatsite.redis_client import get_async_redis, get_redis
from channels.db import database_sync_to_async
from redis.exceptions import ResponseError

from chatsite.tenancy.revocation import Grant, is_revoked, revocations_reload

log = logging.getLogger(__name__)

REVOKED = object()  # what StreamGuard.next returns when the stream must end
CLOSE_TIMEOUT_SECONDS = 2.0

# KEYS[1]: the user's open streams; KEYS[2..]: the grant's revocation markers.
# ARGV: now, slot expiry, slot id, cap (0: refresh only; -1: no slot, markers only), set ttl.
# Returns {-1} when the cap is reached, else {1, marker values...}.
_SLOT = """
local cap = tonumber(ARGV[4])
if cap > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
  if redis.call('ZCARD', KEYS[1]) >= cap then return {-1} end
end
if cap >= 0 then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
  redis.call('EXPIRE', KEYS[1], ARGV[5])
end
local out = {1}
for i = 2, #KEYS do out[i] = redis.call('GET', KEYS[i]) end
return out
"""


class TooManyStreams(RateLimited):
    code = "too_many_streams"


def check_seconds() -> float:
    return settings.CHATSITE["SSE_REVOCATION_CHECK_SECONDS"]


def slot_ttl() -> int:
    """A slot outlives three missed checks, then frees itself."""
    return math.ceil(3 * check_seconds()) + 1


NO_SLOT = -1  # the script's cap for a guard that holds no slot


def _cap(grant: Grant) -> int:
    return settings.CHATSITE["SHARE_MAX_STREAMS_PER_LINK" if grant.share_id else "SSE_MAX_STREAMS_PER_USER"]


def _too_many(grant: Grant) -> TooManyStreams:
    if grant.share_id:
        return TooManyStreams(f"this shared chat has {_cap(grant)} viewers following it already; try again in "
                              "a moment", retry_after=slot_ttl())
    return TooManyStreams(f"you have {_cap(grant)} event streams open "
                          "already; close one, or wait for a run to finish", retry_after=slot_ttl())


class StreamGuard:
    def __init__(self, grant: Grant, slot_id: str | None):
        self.grant = grant
        self._slot_id = slot_id  # None: a watch only, no slot
        self._slots_key = (redis_keys.share_streams(grant.share_id) if grant.share_id
                           else redis_keys.sse_streams(grant.tenant_id, grant.user_id))
        self._markers = [*grant.marker_keys(), redis_keys.revocations_loaded()]
        self._check_every = settings.CHATSITE["SHARE_REVOCATION_CHECK_SECONDS"] if grant.share_id else check_seconds()
        self._next_check = time.monotonic() + self._check_every
        self._closed = slot_id is None
        self.revoked = False  # next() found the grant revoked: the stream ends

    def _args(self, cap: int) -> tuple:
        now = time.time()
        return (_SLOT, 1 + len(self._markers), self._slots_key, *self._markers,
                now, now + slot_ttl(), self._slot_id or "", cap, slot_ttl())

    async def _call(self, cap: int) -> list:
        out = await get_async_redis().eval(*self._args(cap))
        if out[0] != -1 and out[-1] is None:  # Redis lost the markers: rebuilt, then read again
            await database_sync_to_async(revocations_reload)()
            out = await get_async_redis().eval(*self._args(0 if cap > 0 else cap))
        return out

    def _call_sync(self, cap: int) -> list:
        out = get_redis().eval(*self._args(cap))
        if out[0] != -1 and out[-1] is None:
            revocations_reload()
            out = get_redis().eval(*self._args(0 if cap > 0 else cap))
        return out

    def regrant(self, grant: Grant) -> None:
        """Watch `grant` from now on (the same user's, for the same slot): a stream opened
        before its run existed learns the run's chat once it was admitted."""
        self.grant, self._markers = grant, [*grant.marker_keys(), redis_keys.revocations_loaded()]

    @classmethod
    def admit_sync(cls, grant: Grant) -> "StreamGuard | None":
        """admit(), from a request's thread (sync Redis): the slot taken before the request
        admits its run, so a refused stream admits nothing."""
        guard = cls(grant, secrets.token_hex(16))  # a uuid4 object costs twice the time for 32 hex digits
        status, *markers = guard._call_sync(_cap(grant))
        if status == -1:
            raise _too_many(grant)
        if not guard._allowed(markers):
            guard.close_sync()
            return None
        return guard

    @classmethod
    def watching(cls, grant: Grant) -> "StreamGuard":
        """A guard that holds no slot and checks `grant`'s markers every
        SSE_REVOCATION_CHECK_SECONDS (a request waiting for a whole reply; its credential
        was just checked, so the first check is one interval away)."""
        return cls(grant, None)

    def close_sync(self) -> None:
        """close(), from a request's thread: the slot given back at once (best effort)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            get_redis().zrem(self._slots_key, self._slot_id)

    def _allowed(self, markers: list) -> bool:
        """Whether the grant stands, from the script's marker values (the last one is
        `revoked:loaded`'s)."""
        return not self.grant.expired() and not any(is_revoked(v, self.grant.since) for v in markers[:-1])

    @classmethod
    async def admit(cls, grant: Grant) -> "StreamGuard | None":
        """A guard holding a slot for this stream; None when the grant was revoked.
        Raises TooManyStreams (429) when the user has SSE_MAX_STREAMS_PER_USER open."""
        guard = cls(grant, secrets.token_hex(16))
        call = asyncio.ensure_future(guard._call(_cap(grant)))
        try:
            status, *markers = await asyncio.shield(call)
        except asyncio.CancelledError:  # the client hung up meanwhile: the slot may be taken all the same
            call.add_done_callback(guard._admitted_too_late)
            raise
        if status == -1:
            raise _too_many(grant)
        if not guard._allowed(markers):
            guard.close()
            return None
        return guard

    def _admitted_too_late(self, call: asyncio.Future) -> None:
        """The admission's reply, once its stream was gone: a slot it took is given back."""
        if not call.cancelled() and call.exception() is None and call.result()[0] != -1 and not self._closed:
            self._closed = True
            _releaser().release(self._slots_key, self._slot_id)

    async def check(self) -> bool:
        """Refresh the slot; False when the stream must end (one Redis call)."""
        _, *markers = await self._call(0 if self._slot_id else NO_SLOT)
        self._next_check = time.monotonic() + self._check_every
        return self._allowed(markers)

    async def next(self, sub, timeout: float):
        """`sub.next(timeout)` (a batch, or None after `timeout` s of quiet), checking
        meanwhile every SSE_REVOCATION_CHECK_SECONDS (a share link's viewer: every
        SHARE_REVOCATION_CHECK_SECONDS); REVOKED when the stream must end (and `revoked`
        is then true). Every frame of every stream passes here: a batch before the next
        check is due returns at once."""
        now = time.monotonic()
        deadline = now + timeout
        if now < self._next_check:
            batch = await sub.next(min(timeout, self._next_check - now))
            if batch is not None:
                return batch
        while True:
            now = time.monotonic()
            if now >= self._next_check and not await self.check():
                self.revoked = True
                return REVOKED
            if now >= deadline:
                return None
            batch = await sub.next(max(0.0, min(deadline, self._next_check) - now))
            if batch is not None:
                return batch

    def close(self) -> None:
        """Give the slot back (idempotent; if Redis does not answer, the slot expires): a ZREM
        queued to this loop's releaser (_Releaser), which sends it when the loop next turns
        (after the batch it is sending, if any). The stream waits for nothing here:
        a stream's end that waited for the ZREM's answer reached its client after its last
        frame, and a client that stops reading at that frame (an SDK at `[DONE]`) then finds
        the response unfinished and drops the connection: one TCP connection per /v1 call.
        Nor is the ZREM the stream's own command: its task is often cancelled right here (its
        client hung up once the last frame arrived), and a command cancelled while it waits
        for its reply costs its connection (redis-py closes it; the next command opens another)."""
        if self._closed:
            return
        self._closed = True
        _releaser().release(self._slots_key, self._slot_id)


def _zrem(key: str, member: str) -> bytes:
    """ZREM key member in Redis's wire format (RESP)."""
    k, m = key.encode(), member.encode()
    return b"*3\r\n$4\r\nZREM\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(k), k, len(m), m)


# Sent on the releaser's connection: Redis then answers nothing on it, so nothing there reads
# (a read per batch was a wake of this loop per stream). Once, at connect, OFF then ON and ON's
# answer read: a server that refuses OFF (an ACL) answers that first, and the releaser reads.
_REPLY_OFF = b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n"
_REPLY_ON = b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$2\r\nON\r\n"


async def _quiet(conn) -> bool:
    """Tell `conn` to send no replies; False when Redis refused (its answers must be read)."""
    await conn.send_packed_command(_REPLY_OFF + _REPLY_ON, check_health=False)
    try:
        await conn.read_response()  # ON's OK, or OFF's error
    except ResponseError as exc:
        log.warning("Redis refused CLIENT REPLY OFF (%s); the stream slots' releaser reads its answers", exc)
        await conn.read_response()  # ON's
        return False
    await conn.send_packed_command(_REPLY_OFF, check_health=False)
    return True


class _Releaser:
    """Gives streams' slots back for one event loop: close() queues a ZREM; one task sends
    what is queued over one connection it holds, all in one write. That connection is told
    once to send no replies (CLIENT REPLY OFF), so nothing waits for or reads an answer
    (unless Redis refused that: then each answer is read, as before).
    Measured (bench/probes/slot_cost): a stream's slot taken and given back cost 535 K
    instructions with a ZREM through redis-py's client, 409 K sent this way with its answer
    read; 277 K against 325 K without the answer (`--cycles 200`, 2026-12-06). It is this
    module's only use of Redis below redis-py's commands. A failed write drops the connection
    (the next batch takes another); its slots expire on their own within SLOT_TTL. A batch
    Redis does not take within CLOSE_TIMEOUT_SECONDS (its write stuck) is given up by the
    next release (its task cancelled, another started): a check per release, where a timer
    per batch cost ~60 lines of asyncio's."""

    def __init__(self):
        self._queue: list[bytes] = []
        self._wake = asyncio.Event()
        self._sent_at = 0.0  # when the batch in flight was started (monotonic); 0: none in flight
        self._task = asyncio.ensure_future(self._run())  # held here; the releaser is held per loop

    def release(self, key: str, member: str) -> None:
        self._queue.append(_zrem(key, member))
        if self._sent_at and time.monotonic() - self._sent_at > CLOSE_TIMEOUT_SECONDS:
            log.warning("Redis left stream slots unsent for %.0f s; they expire on their own",
                        CLOSE_TIMEOUT_SECONDS)
            self._sent_at = 0.0
            self._task.cancel()
            self._task = asyncio.ensure_future(self._run())
        self._wake.set()

    async def _run(self) -> None:
        conn = None  # this task's own: a cancelled task drops it, whatever state it was left in
        quiet = True
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                batch, self._queue = self._queue, []
                self._sent_at = time.monotonic()
                try:
                    if conn is None:
                        conn = await get_async_redis().connection_pool.get_connection()
                        quiet = await _quiet(conn)
                    await conn.send_packed_command(b"".join(batch), check_health=False)
                    if not quiet:
                        for _ in batch:
                            await conn.read_response()
                except Exception:  # slots given back by their TTL instead
                    log.warning("could not give %d stream slot(s) back; they expire on their own", len(batch),
                                exc_info=True)
                    await _drop(conn)
                    conn = None
                self._sent_at = 0.0
        finally:
            if conn is not None:
                await asyncio.shield(_drop(conn))


async def _drop(conn) -> None:
    if conn is None:
        return
    with contextlib.suppress(Exception):
        await conn.disconnect()
    with contextlib.suppress(Exception):
        await get_async_redis().connection_pool.release(conn)


_RELEASERS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Releaser]" = weakref.WeakKeyDictionary()


def _releaser() -> _Releaser:
    loop = asyncio.get_running_loop()
    releaser = _RELEASERS.get(loop)
    if releaser is None:
        releaser = _RELEASERS[loop] = _Releaser()
    return releaser
