"""The floor of an SSE server: a raw ASGI app that pushes one small frame to every
client every TICK_SECONDS from one ticker task. Its frames look like the platform's
token events and carry the tick's clock in `id:`, so the load generator measures
delivery delay the same way for both.

    daphne -b 127.0.0.1 -p PORT bench.bare_sse:app
    uvicorn --loop uvloop --http httptools --port PORT bench.bare_sse:app
"""
import asyncio
import time

TICK_SECONDS = 0.05
_clients: set = set()
_ticker = None

HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]


async def _tick() -> None:
    seq = 0
    while _clients:
        ms = int(time.time() * 1000)
        frame = (f'id: {ms}-0\nevent: token\ndata: {{"seq": {seq}, "n": 1, "text": " word"}}\n\n').encode()
        msg = {"type": "http.response.body", "body": frame, "more_body": True}
        for send in list(_clients):
            try:
                await send(msg)
            except Exception:  # the client went away
                _clients.discard(send)
        seq += 1
        await asyncio.sleep(max(0.0, TICK_SECONDS - (time.time() * 1000 - ms) / 1000))


async def app(scope, receive, send):
    global _ticker
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] == "/healthz":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": b"retry: 1000\n\n", "more_body": True})
    _clients.add(send)
    if _ticker is None or _ticker.done():
        _ticker = asyncio.create_task(_tick())
    while True:
        if (await receive())["type"] == "http.disconnect":
            _clients.discard(send)
            return
