"""Refuse a request body past DATA_UPLOAD_MAX_MEMORY_SIZE with 413 before anyone
stores it.

`BodyLimit` is the outermost ASGI layer (chatsite/edge/asgi.py): a Content-Length past
the limit is answered at once, without calling the application; a body without
one (chunked) is counted as it arrives and cut off at the limit, so Django never
spools it to a temporary file. Under daphne the body arrives even earlier, in
Twisted, which would buffer it whole before the application sees the request:
chatsite.edge.daphne_server applies the same limit there, with the same answer.
"""
import json

from django.conf import settings

from chatsite.errors import error_body_for, error_headers_for
from chatsite.json_body import too_large_message

REFUSED_BODY = {"type": "http.disconnect"}  # what the application reads after a refusal


def body_limit() -> int | None:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def too_large_response(path: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The 413 (status, headers, body), in the error shape of the URL's API."""
    body = json.dumps(error_body_for(path, 413, "request_too_large", too_large_message())).encode()
    headers = [(name.encode(), value.encode()) for name, value in error_headers_for(path).items()]  # an API's own
    headers += [(b"Content-Type", b"application/json"), (b"Content-Length", str(len(body)).encode()),
                (b"Connection", b"close")]
    return 413, headers, body


def declared_length(scope) -> int | None:
    """The Content-Length of an ASGI http scope (None when absent or not a number)."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            return int(value) if value.strip().isdigit() else None
    return None


def _chunked(scope) -> bool:
    return any(name.lower() == b"transfer-encoding" for name, _ in scope.get("headers", ()))


class BodyLimit:
    """ASGI middleware: 413 for a body past the limit, before the application reads it."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        limit = body_limit()
        if scope["type"] != "http" or limit is None:
            return await self.app(scope, receive, send)
        length = declared_length(scope)
        if length is not None and length > limit:
            return await self._refuse(scope, send)
        if length in (None, 0) and scope.get("method") in ("GET", "HEAD") and not _chunked(scope):
            return await self.app(scope, receive, send)  # no body: nothing to count (an SSE stream's sends stay direct)
        state = {"received": 0, "started": False, "refused": False, "answered": False}

        async def counted_receive():
            if state["refused"]:
                return REFUSED_BODY
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > limit:
                    state["refused"] = True
                    if not state["started"]:  # an answer already under way cannot become a 413
                        state["answered"] = True
                        await self._refuse(scope, send)
                    return REFUSED_BODY  # Django sees the client leave, and stops reading
            return message

        async def guarded_send(message):
            if state["answered"]:
                return  # we answered for the application
            state["started"] = True
            await send(message)

        await self.app(scope, counted_receive, guarded_send)

    @staticmethod
    async def _refuse(scope, send) -> None:
        status, headers, body = too_large_response(scope.get("path", ""))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
