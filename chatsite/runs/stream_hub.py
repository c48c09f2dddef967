"""One Redis reader per web process for every run stream its clients follow.

Instead of one blocking XREAD per SSE client, a single task per event loop
issues one XREAD BLOCK over all followed streams and fans the entries out to
per-client queues. Each subscriber remembers the last id delivered to it and
skips anything at or before it, so the hub may re-read a stream from the
oldest position any subscriber needs (a late joiner replaying from the start)
without ever duplicating an entry for anyone. Subscribing wakes the blocked
read through a private wake-up stream, so a new client waits for nothing.
"""
import asyncio
import logging
import uuid

import redis.asyncio as aioredis
from django.conf import settings

from chatsite import redis_keys
from chatsite.runs import events

log = logging.getLogger(__name__)

BLOCK_MS = 5000
READ_COUNT = 1000
WAKE_TTL_SECONDS = 3600


_id = events.stream_id_key


class HubError(Exception):
    """The hub lost Redis; followers should end their response so clients reconnect."""


class Subscription:
    def __init__(self, key: str, last_id: str):
        self.key = key
        self.last = _id(last_id)
        self.queue: asyncio.Queue = asyncio.Queue()

    def deliver(self, entries: list, read_from: tuple[int, int]) -> None:
        """Entries read after `read_from`; a subscriber that joined behind that
        position waits for the next read, which starts from its own last id."""
        if read_from > self.last:
            return
        fresh = [(eid, fields) for eid, fields in entries if _id(eid) > self.last]
        if fresh:
            self.last = _id(fresh[-1][0])
            self.queue.put_nowait(fresh)

    async def next(self, timeout: float):
        """Every (id, fields) entry delivered since the last call (at least one batch),
        or None after `timeout` seconds. Raises HubError.

        Batches that piled up while the follower was busy come out as one (one SSE
        write); no task is made per wait (asyncio.wait_for would make one)."""
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
                self.queue.put_nowait(more)  # the next call raises it, after these entries are sent
                break
            batch = batch + more
        return batch


class StreamHub:
    def __init__(self):
        self._subs: dict[str, set[Subscription]] = {}
        self._task: asyncio.Task | None = None
        self._client = aioredis.Redis.from_url(settings.REDIS_URL, decode_responses=True, socket_connect_timeout=3)
        self._wake_key = redis_keys.hub_wakeup(uuid.uuid4().hex)
        self._wake_last = "0-0"

    async def subscribe(self, key: str, last_id: str) -> Subscription:
        sub = Subscription(key, last_id)
        self._subs.setdefault(key, set()).add(sub)
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
                for key, entries in result or ():
                    if key == self._wake_key:
                        self._wake_last = entries[-1][0]
                        continue
                    for sub in list(self._subs.get(key, ())):
                        sub.deliver(entries, _id(cursors[key]))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # Redis went away: tell every follower; the next subscribe restarts the hub
            log.warning("stream hub lost Redis: %s", exc)
            for subs in list(self._subs.values()):
                for sub in subs:
                    sub.queue.put_nowait(HubError(str(exc)))
            self._subs.clear()


_hubs: dict[int, StreamHub] = {}


def get_hub() -> StreamHub:
    """The hub of the running event loop."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(id(loop))
    if hub is None:
        hub = _hubs[id(loop)] = StreamHub()
    return hub
