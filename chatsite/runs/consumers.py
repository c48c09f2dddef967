"""GET /api/runs/{id}/events: a run's stream as Server-Sent Events.

Replays from Last-Event-ID (or the start), then follows live; a comment line
every ~15 s keeps proxies from closing the connection; closes after the
terminal entry. A finished run whose stream expired is served from Postgres as
one snapshot. Reading never starts a generation.
"""
import asyncio
import contextlib
import json
import logging
from urllib.parse import parse_qs

import redis
from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer
from django.conf import settings
from django.db import InterfaceError, OperationalError

from chatsite import redis_keys
from chatsite.errors import ServiceError
from chatsite.redis_client import get_async_redis
from chatsite.runs import events
from chatsite.runs.access import open_events, run_snapshot
from chatsite.runs.stream_hub import get_hub
from chatsite.tenancy.stream_guard import REVOKED

log = logging.getLogger(__name__)

UNAVAILABLE = (OperationalError, InterfaceError, redis.ConnectionError, redis.TimeoutError)

SSE_HEADERS = [
    (b"Content-Type", b"text/event-stream; charset=utf-8"),
    (b"Cache-Control", b"no-cache, no-transform"),
    (b"X-Accel-Buffering", b"no"),
]


class RunEventsConsumer(AsyncHttpConsumer):
    async def http_request(self, message):
        if message.get("more_body"):
            return
        # Stream from a task so that a client hanging up (http.disconnect) is
        # seen at once and stops the task, instead of after the run ends.
        self._task = asyncio.create_task(self._serve())

    async def http_disconnect(self, message):
        task = getattr(self, "_task", None)
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        raise StopConsumer()

    async def _error(self, status: int, code: str, message: str, retry_after: int | None = None) -> None:
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        headers = [(b"Content-Type", b"application/json")]
        if retry_after:
            headers.append((b"Retry-After", str(retry_after).encode()))
        await self.send_response(status, body, headers=headers)

    def _query(self, name: str) -> str:
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        return (query.get(name) or [""])[0].strip()

    def _last_event_id(self) -> str | None:
        headers = dict(self.scope.get("headers", []))
        value = headers.get(b"last-event-id", b"").decode("latin-1").strip() or self._query("last_event_id")
        return value or None

    async def _serve(self) -> None:
        try:
            await self._serve_inner()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("SSE stream failed")
            with contextlib.suppress(Exception):
                if getattr(self, "_streaming", False):
                    await self.send_body(b"", more_body=False)
                elif isinstance(exc, UNAVAILABLE):  # before any byte was sent: answer in the API's error shape
                    await self._error(503, "service_unavailable", "the service is briefly unavailable; "
                                                                  "try again in a few seconds")
                else:
                    await self._error(500, "server_error", "something went wrong on our side; it has been logged")
        finally:
            if getattr(self, "_guard", None) is not None:  # give back the stream's slot
                await self._guard.close()

    async def _serve_inner(self) -> None:
        if self.scope["method"] not in ("GET", "HEAD"):
            return await self._error(405, "method_not_allowed", "use GET to read a run's events")
        run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        try:  # the events_url's token needs no database; the guard holds a slot and watches for revocation
            self._guard = await open_events(self.scope, run_id, self._query("token"))
        except ServiceError as exc:
            return await self._error(exc.status, exc.code, exc.message, exc.retry_after)
        last_id = self._last_event_id()
        if last_id is not None and not events.is_valid_stream_id(last_id):
            return await self._error(400, "invalid_last_event_id",
                                     "Last-Event-ID must be an event id this stream sent, like 1700000000000-0")
        self._streaming = True
        await self.send_headers(status=200, headers=SSE_HEADERS)
        await self.send_body(b"retry: 1000\n\n", more_body=True)
        await self._follow(run_id, last_id or "0-0")
        await self.send_body(b"", more_body=False)

    async def _follow(self, run_id: int, last_id: str) -> None:
        key = redis_keys.run_stream(run_id)
        keepalive = settings.CHATSITE["SSE_KEEPALIVE_SECONDS"]
        if await self._sent_snapshot(key, run_id):
            return
        if last_id != "0-0" and await self._sent_ended(key, last_id):
            return
        # A write retried across a Redis hiccup may repeat an entry; clients never see it twice.
        sent_through = await self._seq_through(key, last_id)
        hub = get_hub()
        sub = await hub.subscribe(key, last_id)
        try:
            while True:
                batch = await self._guard.next(sub, keepalive)
                if batch is REVOKED:  # the key, session, membership or chat it was opened with is gone
                    return
                if batch is None:  # quiet: keep proxies from closing; a run may have expired meanwhile
                    if await self._sent_snapshot(key, run_id):
                        return
                    await self.send_body(events.sse_comment(), more_body=True)
                    continue
                frames = []
                for entry_id, fields in batch:
                    entry = events.decode(entry_id, fields)
                    if entry.type == events.TOKEN:
                        if entry.seq + entry.n <= sent_through:
                            continue
                        sent_through = entry.seq + entry.n
                    frames.append(events.sse_frame(entry))
                    if entry.is_terminal:
                        return await self.send_body(b"".join(frames), more_body=True)
                if frames:
                    await self.send_body(b"".join(frames), more_body=True)
        finally:
            hub.unsubscribe(sub)

    async def _sent_ended(self, key: str, last_id: str) -> bool:
        """A client resuming at or after the terminal entry (it had the end, or its
        connection dropped as the end arrived) gets the terminal event again, not a
        stream that never ends: the text is unchanged and the client knows to stop."""
        entries = await get_async_redis().xrevrange(key, count=1)
        for entry_id, fields in entries:
            entry = events.decode(entry_id, fields)
            if entry.is_terminal and events.stream_id_key(last_id) >= events.stream_id_key(entry_id):
                await self.send_body(events.sse_frame(entry), more_body=True)
                return True
        return False

    async def _seq_through(self, key: str, last_id: str) -> int:
        """How many tokens the client had at `last_id` (0 from the start)."""
        if last_id == "0-0":
            return 0
        entries = await get_async_redis().xrevrange(key, max=last_id, count=1)
        for entry_id, fields in entries:
            entry = events.decode(entry_id, fields)
            return entry.seq + entry.n if entry.type == events.TOKEN else 0
        return 0

    async def _sent_snapshot(self, key: str, run_id: int) -> bool:
        """A finished run whose stream has expired is served from Postgres."""
        r = get_async_redis()
        if await r.exists(key):
            return False
        snapshot = await database_sync_to_async(run_snapshot)(run_id)
        if snapshot is None:
            return False
        if await r.exists(key):  # no stream yet a moment ago, and now a finished run: it was just made
            return False  # follow the stream: the client gets ids to resume from
        await self.send_body(snapshot, more_body=True)
        return True
