"""A cheap SSE load generator: many streams over raw asyncio protocols (uvloop).

No HTTP library per frame: a connection parses the response head once, then the
chunked body with bytes.find, and reads each frame's `id:` (its first part is the
writer's clock in ms: Redis's XADD time for the platform, the tick time for the bare
app) to record the delivery delay. `cost()` says what the generator itself spent,
so a benchmark can show it was not the bottleneck.
"""
import asyncio
import time

MAX_DELAYS = 2_000_000


class Stats:
    def __init__(self):
        self.frames = 0
        self.tokens = 0
        self.delays_ms: list[float] = []
        self.ended = 0
        self.errors: list[str] = []
        self.measure_after_ms = 0.0  # frames stamped before this are not timed (warm-up)

    def reset(self, after_ms: float) -> None:
        self.frames = self.tokens = self.ended = 0
        self.delays_ms = []
        self.errors = []
        self.measure_after_ms = after_ms


class SSEProtocol(asyncio.Protocol):
    """One GET whose response is an SSE stream in a chunked body."""

    def __init__(self, request: bytes, stats: Stats, done: asyncio.Future, count_tokens: bool):
        self.request = request
        self.stats = stats
        self.done = done
        self.count_tokens = count_tokens
        self.buf = b""
        self.head = True
        self.body = b""  # de-chunked bytes not yet split into frames
        self.status = 0
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes):
        self.buf += data
        if self.head:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            self.status = int(self.buf[9:12])
            self.buf = self.buf[end + 4:]
            self.head = False
            if self.status != 200:
                self.stats.errors.append(f"HTTP {self.status}")
                self.transport.close()
                return
        self._dechunk()
        self._frames()

    def _dechunk(self):
        buf = self.buf
        pos = 0
        parts = []
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size = int(buf[pos:eol].split(b";")[0], 16)
            if len(buf) < eol + 2 + size + 2:
                break
            parts.append(buf[eol + 2:eol + 2 + size])
            pos = eol + 2 + size + 2
            if size == 0:
                self.transport.close()
                break
        self.buf = buf[pos:]
        if parts:
            self.body += b"".join(parts)

    def _frames(self):
        body = self.body
        now_ms = time.time() * 1000
        stats = self.stats
        pos = 0
        while True:
            end = body.find(b"\n\n", pos)
            if end < 0:
                break
            frame = body[pos:end]
            pos = end + 2
            if frame.startswith(b"id: "):
                stamp = float(frame[4:frame.find(b"-", 4)])
                if stamp >= stats.measure_after_ms:
                    stats.frames += 1
                    if len(stats.delays_ms) < MAX_DELAYS:
                        stats.delays_ms.append(now_ms - stamp)
                    if self.count_tokens:
                        k = frame.find(b'"n": ')
                        if k > 0:
                            stats.tokens += int(frame[k + 5:frame.find(b",", k)])
                if b"\nevent: done" in frame or b"\nevent: error" in frame:
                    stats.ended += 1
                    self.transport.close()
        self.body = body[pos:]

    def connection_lost(self, exc):
        if not self.done.done():
            self.done.set_result(self.status)


async def open_stream(host: str, port: int, path: str, stats: Stats, *, headers: dict | None = None,
                      count_tokens: bool = False) -> asyncio.Future:
    """Open one SSE stream; the returned future resolves when the connection closes."""
    loop = asyncio.get_running_loop()
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n{extra}\r\n").encode()
    done = loop.create_future()
    await loop.create_connection(lambda: SSEProtocol(request, stats, done, count_tokens), host, port)
    return done


def cost() -> float:
    """CPU seconds this process has used so far (all threads)."""
    return time.process_time()


def use_uvloop() -> None:
    import uvloop

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
