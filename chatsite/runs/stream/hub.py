"""One Redis reader per web process for every stream its clients follow.

Instead of one blocking XREAD per client, one task per event loop issues one XREAD
BLOCK over all followed streams and fans the entries out to per-client queues. An
entry is decoded once per process (the stream's `decode`, from the reply as Redis
sends it: redis-py's per-entry parsing into dicts is skipped), and every client of
that stream gets the same object. Each subscriber remembers the last id delivered to it
and skips anything at or before it, so the hub may re-read a stream from the oldest
position any subscriber needs (a late joiner replaying from the start) without ever
duplicating an entry for anyone. Subscribing wakes the blocked read through a
private wake-up stream, so a new client waits for nothing.
"""
import asyncio
import logging
import uuid
from collections.abc import Callable

import redis
import redis.asyncio as aioredis
from django.conf import settings

from chatsite import redis_keys
from chatsite.runs.stream.codec import stream_id_key as _id

log = logging.getLogger(__name__)

BLOCK_MS = 5000
READ_COUNT = 1000
WAKE_TTL_SECONDS = 3600
IDLE_SWEEP_SECONDS = 0.25


def _bulk(value: bytes) -> bytes:
    """One argument of a command in Redis's wire format."""
    return b"$%d\r\n%s\r\n" % (len(value), value)


_XREAD_HEAD = b"".join(map(_bulk, (b"XREAD", b"COUNT", b"%d" % READ_COUNT, b"BLOCK", b"%d" % BLOCK_MS,
                                  b"STREAMS")))


class HubError(redis.ConnectionError):
    """The hub lost Redis; followers should end their response so clients reconnect (a
    connection error: the surfaces answer it as Redis being away)."""


def _raw(entry_id: str, flat: list):
    return entry_id, dict(zip(flat[::2], flat[1::2]))


class Subscription:
    """One client's view of one stream: the batches delivered to it since it last took
    them. Waiting costs no timer: the hub's idle sweep wakes a subscriber whose wait
    ran past its timeout (within IDLE_SWEEP_SECONDS)."""

    __slots__ = ("key", "last", "_batches", "_waiter", "_error", "deadline")

    def __init__(self, key: str, last_id: str):
        self.key = key
        self.last = _id(last_id)
        self._batches: list[list] = []
        self._waiter: asyncio.Future | None = None
        self._error: Exception | None = None
        self.deadline = 0.0

    def deliver(self, read: "Read") -> None:
        """What one XREAD brought of this stream. A subscriber that joined behind the
        read's start waits for the next read, which starts from its own last id."""
        last = self.last
        if read.start > last:
            return
        if read.first > last:
            fresh = read.items  # the live edge: the same list for every subscriber
        else:
            fresh = [item for key, item in read.keyed() if key > last]
            if not fresh:
                return
        self.last = read.last
        self._batches.append(fresh)
        self._wake()

    def fail(self, exc: Exception) -> None:
        self._error = exc
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def expire(self, now: float) -> None:
        """The idle sweep: wake a wait that has run past its timeout."""
        if self._waiter is not None and now >= self.deadline:
            self._wake()

    async def next(self, timeout: float):
        """Every item delivered since the last call (at least one batch), or None
        after about `timeout` seconds. Raises HubError.

        Batches that piled up while the follower was busy come out as one (one write
        to the client)."""
        if not self._batches and self._error is None:
            loop = asyncio.get_running_loop()
            self._waiter = loop.create_future()
            self.deadline = loop.time() + timeout
            try:
                await self._waiter
            finally:
                self._waiter = None
        batches = self._batches
        if not batches:
            if self._error is not None:
                raise self._error
            return None
        self._batches = []
        if len(batches) == 1:
            return batches[0]
        return [item for batch in batches for item in batch]


class Read:
    """One stream's entries from one XREAD, decoded once for all its subscribers."""

    __slots__ = ("start", "raw", "items", "first", "last", "_keyed")

    def __init__(self, start: tuple[int, int], raw: list, decode: Callable):
        self.start = start
        self.raw = raw
        self.items = [decode(eid, flat) for eid, flat in raw]
        self.first, self.last = _id(raw[0][0]), _id(raw[-1][0])
        self._keyed = None

    def keyed(self) -> list:
        """(id tuple, item) pairs, for a subscriber part of the way through them."""
        if self._keyed is None:
            self._keyed = [(_id(eid), item) for (eid, _), item in zip(self.raw, self.items)]
        return self._keyed


class StreamHub:
    def __init__(self):
        self._subs: dict[str, set[Subscription]] = {}
        self._decoders: dict[str, Callable] = {}
        self._task: asyncio.Task | None = None
        self._sweeper: asyncio.Task | None = None
        self._client = aioredis.Redis.from_url(settings.REDIS_URL, decode_responses=True, socket_connect_timeout=3)
        self._wake_key = redis_keys.hub_wakeup(uuid.uuid4().hex)
        self._wake_last = "0-0"
        self._wake_part = _bulk(self._wake_key.encode())
        # Per followed stream, in one order: where the next XREAD starts (the lowest last id
        # of its subscribers), and the command's key and id parts, packed. A read changes
        # them only for the streams it brought, so building the next read does no work per
        # stream that Python can see (two joins), however many streams are followed.
        self._low: dict[str, tuple[int, int]] = {}
        self._key_parts: dict[str, bytes] = {}
        self._id_parts: dict[str, bytes] = {}

    async def subscribe(self, key: str, last_id: str, *, decode: Callable | None = None) -> Subscription:
        """Follow `key` after `last_id`. `decode(entry_id, flat)` (flat: field, value,
        ...) makes the items `next()` returns (once per entry, shared by all of the
        key's subscribers); without it they are (entry_id, fields dict) pairs."""
        sub = Subscription(key, last_id)
        subs = self._subs.get(key)
        if subs is None:
            subs = self._subs[key] = set()
            self._key_parts[key] = _bulk(key.encode())
            self._set_low(key, sub.last)
        elif sub.last < self._low[key]:
            self._set_low(key, sub.last)
        subs.add(sub)
        self._decoders[key] = decode or _raw
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep_idle())
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())
        else:  # interrupt the blocked XREAD so the new stream is read at once
            await self._client.xadd(self._wake_key, {"w": "1"}, maxlen=16, approximate=True)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        key = sub.key
        subs = self._subs.get(key)
        if subs is not None and sub in subs:
            subs.discard(sub)
            if not subs:
                self._forget(key)
            elif sub.last == self._low[key]:  # it may have been the one behind: read from the next lowest
                self._set_low(key, min(s.last for s in subs))

    @property
    def num_streams(self) -> int:
        return len(self._subs)

    def _set_low(self, key: str, low: tuple[int, int]) -> None:
        self._low[key] = low
        self._id_parts[key] = _bulk(b"%d-%d" % low)

    def _tables(self) -> tuple[dict, ...]:
        """Everything the hub keeps per followed stream."""
        return self._subs, self._decoders, self._low, self._key_parts, self._id_parts

    def _forget(self, key: str) -> None:
        for table in self._tables():
            table.pop(key, None)

    def _clear(self) -> None:
        for table in self._tables():
            table.clear()

    def _packed_xread(self) -> bytes:
        """XREAD COUNT .. BLOCK .. STREAMS keys.. ids.. in Redis's wire format, from the
        parts kept per stream (redis-py's packing of a command naming hundreds of streams
        was a tenth of the web's CPU per delivered frame, and formatting every stream's
        id per read the next largest part of the hub's)."""
        return b"".join((b"*%d\r\n" % (8 + 2 * len(self._key_parts)), _XREAD_HEAD,
                         b"".join(self._key_parts.values()), self._wake_part,
                         b"".join(self._id_parts.values()), _bulk(self._wake_last.encode())))

    async def _run(self) -> None:
        pool = self._client.connection_pool
        conn = None
        try:
            await self._client.expire(self._wake_key, WAKE_TTL_SECONDS)
            conn = await pool.get_connection("XREAD")
            while self._subs:
                starts = self._low.copy()  # where this read starts, per stream (a join may lower it meanwhile)
                await conn.send_packed_command(self._packed_xread(), check_health=False)
                result = await conn.read_response()
                if isinstance(result, Exception):
                    raise result
                for key, raw in result or ():
                    if key == self._wake_key:
                        self._wake_last = raw[-1][0]
                        continue
                    subs = self._subs.get(key)
                    if not subs:
                        continue
                    read = Read(starts[key], raw, self._decoders.get(key, _raw))
                    for sub in list(subs):
                        sub.deliver(read)
                    low = min(sub.last for sub in subs)  # where the next read of it starts
                    if low != self._low[key]:
                        self._set_low(key, low)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # Redis went away: tell every follower; the next subscribe restarts the hub
            log.warning("stream hub lost Redis: %s", exc)
            for subs in list(self._subs.values()):
                for sub in subs:
                    sub.fail(HubError(str(exc)))
            self._clear()
        finally:
            if conn is not None:
                await pool.release(conn)

    async def _sweep_idle(self) -> None:
        """Wake the subscribers whose wait ran past its timeout (their keep-alive)."""
        loop = asyncio.get_running_loop()
        while self._subs:
            await asyncio.sleep(IDLE_SWEEP_SECONDS)
            now = loop.time()
            for subs in list(self._subs.values()):
                for sub in subs:
                    sub.expire(now)


_hubs: dict[tuple[int, str], StreamHub] = {}

RUNS, USERS = "runs", "users"


def get_hub(lane: str = RUNS) -> StreamHub:
    """The hub of the running event loop for one lane of streams. Run streams (busy
    while followed) and users' event streams (one per open window, idle nearly always)
    are read by separate hubs, so a web process's many idle windows add nothing to
    the reads that carry tokens: each XREAD names the streams of its lane only."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get((id(loop), lane))
    if hub is None:
        hub = _hubs[(id(loop), lane)] = StreamHub()
    return hub
