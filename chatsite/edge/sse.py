"""The response of every SSE stream Django serves (a streamed POST, /v1's streams, the
web page's live updates): `text/event-stream`, never cached nor buffered by a proxy.

Django closes (`aclosing`) what a streaming response's `__aiter__` returns once the
response ends, a client's hang-up included. By default that is a wrapper of a wrapper
of the body, and closing it leaves the body to the garbage collector, suspended at a
`yield` when the hang-up came during a send: its `finally` (a stream slot given back,
a hub subscription ended) waited for a collection. Here `__aiter__` is the body, so
its `finally` runs as the response ends. The body yields bytes (no make_bytes)."""
from django.http import StreamingHttpResponse


class SseResponse(StreamingHttpResponse):
    def __init__(self, body, **headers):
        super().__init__(body, content_type="text/event-stream; charset=utf-8")
        self._body = body
        self["Cache-Control"] = "no-cache, no-transform"
        self["X-Accel-Buffering"] = "no"
        for name, value in headers.items():
            self[name.replace("_", "-")] = value

    def __aiter__(self):
        return self._body
