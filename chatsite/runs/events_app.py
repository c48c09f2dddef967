"""GET /api/runs/{id}/events: a run's stream as Server-Sent Events, as a plain ASGI app.

The token path's last hop, so it is lean: no consumer class, no session middleware
wrapping every send; each frame is one `send` of bytes the process encoded once for
every client of that run (chatsite.runs.sse). What a client is owed (resume from
Last-Event-ID, repeats skipped, the end said again to a client that had it, an expired
run from Postgres) is the follower's (chatsite.runs.stream.follow). A comment line every
SSE_KEEPALIVE_SECONDS keeps proxies from closing the connection; the response ends after
the terminal entry; a client hanging up stops only its own reading (not the run).
"""
import asyncio
import contextlib
import json
import logging
from contextlib import aclosing
from urllib.parse import parse_qs

from django.conf import settings

from chatsite.errors import UNAVAILABLE, ServiceError
from chatsite.runs import sse
from chatsite.runs.access import open_events
from chatsite.runs.stream import codec

log = logging.getLogger(__name__)


SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


class Request:
    """What the app reads of the ASGI scope."""

    __slots__ = ("scope", "headers", "query")

    def __init__(self, scope):
        self.scope = scope
        self.headers = dict(scope.get("headers", []))
        self.query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)

    def param(self, name: str) -> str:
        return (self.query.get(name) or [""])[0].strip()

    def last_event_id(self) -> tuple[str | None, str]:
        """The id to resume after, and where it came from (the header wins); one sent
        empty is "", which names no event (a browser sends none rather than an empty one)."""
        if b"last-event-id" in self.headers:
            return self.headers[b"last-event-id"].decode("latin-1").strip(), "Last-Event-ID"
        values = self.query.get("last_event_id")
        return (values[0].strip() if values else None), "last_event_id"


async def _error(send, status: int, code: str, message: str, headers=(), retry_after: int | None = None,
                 field: str | None = None) -> None:
    if retry_after:
        headers = [*headers, (b"retry-after", str(retry_after).encode())]
    body = json.dumps({"error": {"code": code, "message": message, **({"field": field} if field else {})}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *headers]})
    await send({"type": "http.response.body", "body": body})


async def run_events(scope, receive, send) -> None:
    """The ASGI app (routed in chatsite/edge/asgi.py, with `url_route` kwargs run_id)."""
    if scope["type"] != "http":
        return
    serving = asyncio.create_task(_serve(scope, send))
    watching = asyncio.create_task(_until_disconnect(receive))
    try:
        await asyncio.wait({serving, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (serving, watching):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


async def _until_disconnect(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _serve(scope, send) -> None:
    streaming, outlet = False, None
    try:
        if scope["method"] not in ("GET", "HEAD"):
            return await _error(send, 405, "method_not_allowed", "use GET to read a run's events")
        req = Request(scope)
        run_id = int(scope["url_route"]["kwargs"]["run_id"])
        try:  # the events_url's token needs no database; the outlet holds a slot and watches for revocation
            outlet, via_token = await open_events(scope, run_id, req.param("token"))
        except ServiceError as exc:
            return await _error(send, exc.status, exc.code, exc.message, retry_after=exc.retry_after)
        # A token younger than the stream TTL means the run is too: its stream cannot have expired.
        fresh = via_token and settings.CHATSITE["EVENTS_TOKEN_SECONDS"] < settings.CHATSITE["STREAM_TTL_SECONDS"]
        last_id, sent_as = req.last_event_id()
        if last_id is not None and not codec.is_valid_stream_id(last_id):
            return await _error(send, 400, "invalid_last_event_id",
                                f"{sent_as} must be an event id this stream sent, like 1700000000000-0",
                                field=sent_as)
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        streaming = True
        await send({"type": "http.response.body", "body": sse.RETRY, "more_body": True})
        if scope["method"] == "GET":  # ends at the terminal entry, or when the grant is revoked
            async with aclosing(sse.body(run_id, after=last_id, fresh=fresh, outlet=outlet)) as bodies:
                async for body in bodies:  # a hang-up during a send closes the follower at once
                    await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.exception("SSE stream of %s failed", scope.get("path"))
        with contextlib.suppress(Exception):
            if streaming:
                await send({"type": "http.response.body", "body": b""})
            elif isinstance(exc, UNAVAILABLE):  # before any byte was sent: answer in the API's error shape
                await _error(send, 503, "service_unavailable", "the service is briefly unavailable; try again in "
                             "a few seconds", headers=[(b"retry-after", b"5")])
            else:
                await _error(send, 500, "server_error", "something went wrong on our side; it has been logged")
    finally:
        if outlet is not None:  # give back the stream's slot
            outlet.close()
