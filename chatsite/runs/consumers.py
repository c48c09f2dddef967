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

from chatsite.errors import ServiceError
from chatsite.runs import sse
from chatsite.runs.access import authorize_run, token_grants
from chatsite.runs.stream import codec
from chatsite.runs.stream.follow import follow

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

    async def _error(self, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        await self.send_response(status, body, headers=[(b"Content-Type", b"application/json")])

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

    async def _serve_inner(self) -> None:
        if self.scope["method"] not in ("GET", "HEAD"):
            return await self._error(405, "method_not_allowed", "use GET to read a run's events")
        run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        granted = token_grants(self._query("token"), run_id)  # the events_url's token needs no database
        # A token younger than the stream TTL means the run is too: its stream cannot have expired.
        fresh = granted and settings.CHATSITE["EVENTS_TOKEN_SECONDS"] < settings.CHATSITE["STREAM_TTL_SECONDS"]
        if not granted:
            try:
                await database_sync_to_async(authorize_run)(self.scope, run_id)
            except ServiceError as exc:
                return await self._error(exc.status, exc.code, exc.message)
        last_id = self._last_event_id()
        if last_id is not None and not codec.is_valid_stream_id(last_id):
            return await self._error(400, "invalid_last_event_id",
                                     "Last-Event-ID must be an event id this stream sent, like 1700000000000-0")
        self._streaming = True
        await self.send_headers(status=200, headers=SSE_HEADERS)
        await self.send_body(sse.RETRY, more_body=True)
        await self._follow(run_id, last_id, fresh)
        await self.send_body(b"", more_body=False)

    async def _follow(self, run_id: int, last_id: str | None, fresh: bool) -> None:
        async for batch in follow(run_id, after=last_id, fresh=fresh):
            await self.send_body(sse.KEEPALIVE if batch is None else sse.frames(batch), more_body=True)
