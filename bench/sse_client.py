"""One lightweight SSE reader (aiohttp) for both HTTP arms, so the client costs the
same whichever server it reads: every event is stamped when its bytes arrive."""
import json
import time
from dataclasses import dataclass

import aiohttp


@dataclass
class Event:
    t: float  # perf_counter on arrival
    wall_ms: float  # time.time() in ms on arrival (to compare with a Redis stream id)
    id: str | None
    event: str
    data: str

    def json(self):
        return json.loads(self.data)


class LineParser:
    """The SSE wire format, one line at a time (shared with the tests' client,
    tests/sse.py): `feed` returns (id, event, data) when a line ends an event,
    else None; comment lines (keep-alives) are skipped."""

    def __init__(self):
        self.event_id, self.kind, self.data = None, "message", []

    def feed(self, line: str) -> tuple[str | None, str, str] | None:
        if line == "":
            out = (self.event_id, self.kind, "\n".join(self.data)) if self.data else None
            self.event_id, self.kind, self.data = None, "message", []
            return out
        if line.startswith("id:"):
            self.event_id = line[3:].strip()
        elif line.startswith("event:"):
            self.kind = line[6:].strip()
        elif line.startswith("data:"):
            self.data.append(line[5:].lstrip())
        return None


async def events(resp: aiohttp.ClientResponse):
    """Yield SSE events as they arrive, each stamped when its bytes did."""
    parser = LineParser()
    async for raw in resp.content:
        done = parser.feed(raw.decode().rstrip("\r\n"))
        if done is not None:
            yield Event(time.perf_counter(), time.time() * 1000, *done)


def session(limit: int) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=limit, force_close=False),
                                 timeout=aiohttp.ClientTimeout(total=600, sock_read=120))
