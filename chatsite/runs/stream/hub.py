"""One Redis reader per web process for every stream its clients follow.

Instead of one blocking XREAD per client, one task per event loop issues one XREAD
BLOCK over all followed streams and fans the entries out to per-client queues. An
entry is decoded once per process (the stream's `decode`), and every client of that
stream gets the same object. Each subscriber remembers the last id delivered to it
and skips anything at or before it, so the hub may re-read a stream from the oldest
position any subscriber needs (a late joiner replaying from the start) without ever
duplicating an entry for anyone. Subscribing wakes the blocked read through a
private wake-up stream, so a new client waits for nothing.
"""
import asyncio
import logging
import uuid
from collections.abc import Callable

import redis.asyncio as aioredis
from django.conf import settings

from chatsite import redis_keys
from chatsite.runs.stream.codec import stream_id_key as _id

log = logging.getLogger(__name__)

BLOCK_MS = 5000
READ_COUNT = 1000
WAKE_TTL_SECONDS = 3600


class HubError(Exception):
    """The hub lost Redis; followers should end their response so clients reconnect."""


def _raw(entry_id: str, fields: dict):
    return entry_id, fields


class Subscription:
    __slots__ = ("key", "last", "queue")

    def __init__(self, key: str, last_id: str):
        self.key = key
        self.last = _id(last_id)
        self.queue: asyncio.Queue = asyncio.Queue()

    def deliver(self, items: list, read_from: tuple[int, int]) -> None:
        """(id tuple, item) pairs read after `read_from`; a subscriber that joined
        behind that position waits for the next read, which starts from its own last id."""
        if read_from > self.last:
            return
        last = self.last
        if items[0][0] > last:
            fresh = [item for _, item in items]
        else:
            fresh = [item for key, item in items if key > last]
        if fresh:
            self.last = items[-1][0]
            self.queue.put_nowait(fresh)

    async def next(self, timeout: float):
        """Every item delivered since the last call (at least one batch), or None
        after `timeout` seconds. Raises HubError.

        Batches that piled up while the follower was busy come out as one (one write
        to the client); no task is made per wait (asyncio.wait_for would make one)."""
        if self.queue.empty():
            try:
                async with asyncio.timeout(timeout):
                    item = await self.queue.get()
            except TimeoutError:
                return None
        else:
            item = self.queue.get_nowait()
        if isinstance(item, Exception):
            raise item
        batch = item
        while not self.queue.empty():
            more = self.queue.get_nowait()
            if isinstance(more, Exception):
                self.queue.put_nowait(more)  # the next call raises it, after these items are sent
                break
            batch = batch + more
        return batch


class StreamHub:
    def __init__(self):
        self._subs: dict[str, set[Subscription]] = {}
        self._decoders: dict[str, Callable] = {}
        self._task: asyncio.Task | None = None
        self._client = aioredis.Redis.from_url(settings.REDIS_URL, decode_responses=True, socket_connect_timeout=3)
        self._wake_key = redis_keys.hub_wakeup(uuid.uuid4().hex)
        self._wake_last = "0-0"

    async def subscribe(self, key: str, last_id: str, *, decode: Callable | None = None) -> Subscription:
        """Follow `key` after `last_id`. `decode(entry_id, fields)` makes the items
        `next()` returns (once per entry, shared by all of the key's subscribers);
        without it they are (entry_id, fields) pairs."""
        sub = Subscription(key, last_id)
        self._subs.setdefault(key, set()).add(sub)
        self._decoders[key] = decode or _raw
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())
        else:  # interrupt the blocked XREAD so the new stream is read at once
            await self._client.xadd(self._wake_key, {"w": "1"}, maxlen=16, approximate=True)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        subs = self._subs.get(sub.key)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[sub.key]
                self._decoders.pop(sub.key, None)

    @property
    def num_streams(self) -> int:
        return len(self._subs)

    def _cursors(self) -> dict[str, str]:
        cursors = {key: "%d-%d" % min(s.last for s in subs) for key, subs in self._subs.items() if subs}
        cursors[self._wake_key] = self._wake_last
        return cursors

    async def _run(self) -> None:
        try:
            await self._client.expire(self._wake_key, WAKE_TTL_SECONDS)
            while self._subs:
                cursors = self._cursors()
                result = await self._client.xread(cursors, count=READ_COUNT, block=BLOCK_MS)
                for key, raw in result or ():
                    if key == self._wake_key:
                        self._wake_last = raw[-1][0]
                        continue
                    subs = self._subs.get(key)
                    if not subs:
                        continue
                    decode = self._decoders.get(key, _raw)
                    items = [(_id(eid), decode(eid, fields)) for eid, fields in raw]
                    read_from = _id(cursors[key])
                    for sub in list(subs):
                        sub.deliver(items, read_from)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # Redis went away: tell every follower; the next subscribe restarts the hub
            log.warning("stream hub lost Redis: %s", exc)
            for subs in list(self._subs.values()):
                for sub in subs:
                    sub.queue.put_nowait(HubError(str(exc)))
            self._subs.clear()
            self._decoders.clear()


_hubs: dict[int, StreamHub] = {}


def get_hub() -> StreamHub:
    """The hub of the running event loop."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(id(loop))
    if hub is None:
        hub = _hubs[id(loop)] = StreamHub()
    return hub
