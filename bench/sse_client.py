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


async def events(resp: aiohttp.ClientResponse):
    """Yield SSE events as they arrive; comment lines (keep-alives) are skipped."""
    event_id, kind, data = None, "message", []
    async for raw in resp.content:
        line = raw.decode().rstrip("\r\n")
        if line == "":
            if data:
                yield Event(time.perf_counter(), time.time() * 1000, event_id, kind, "\n".join(data))
            event_id, kind, data = None, "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def session(limit: int) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=limit, force_close=False),
                                 timeout=aiohttp.ClientTimeout(total=600, sock_read=120))
