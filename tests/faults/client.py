"""A client that reads a run like a browser's EventSource: it reconnects after any
error with Last-Event-ID, and a watchdog fails the test if it waits too long."""
import threading
import time
from dataclasses import dataclass, field

import httpx

from tests.sse import Event, parse, text_of


@dataclass
class Followed:
    events: list[Event] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    reconnects: int = 0

    @property
    def text(self) -> str:
        return text_of(self.events)

    @property
    def terminal(self) -> Event | None:
        return self.events[-1] if self.events and self.events[-1].event in ("done", "error") else None

    def longest_stall(self) -> float:
        gaps = [b - a for a, b in zip(self.arrivals, self.arrivals[1:])]
        return max(gaps, default=0.0)


def follow(url: str, headers: dict, *, drop_after: set[int] = frozenset(), watchdog: float = 30.0,
           base_urls: list[str] | None = None, read_timeout: float | None = None) -> Followed:
    """Read to the terminal event. `drop_after`: event counts after which to hang up
    and reconnect. `base_urls`: web processes to fail over between. `read_timeout`:
    how long a silent connection is trusted (the server sends a keep-alive every
    SSE_KEEPALIVE_SECONDS; default `watchdog`), then the client goes to the next web."""
    timeout = httpx.Timeout(read_timeout or watchdog, connect=min(read_timeout or watchdog, 5.0))
    out, last_id, last_seen = Followed(), None, time.monotonic()
    bases = base_urls or [""]
    turn = 0
    while out.terminal is None:
        if time.monotonic() - last_seen > watchdog:
            raise TimeoutError(f"no event for {watchdog} s after {len(out.events)} events")
        hdrs = dict(headers, **({"Last-Event-ID": last_id} if last_id else {}))
        try:
            with httpx.stream("GET", bases[turn % len(bases)] + url, headers=hdrs, timeout=timeout) as resp:
                resp.raise_for_status()
                for ev in parse(resp.iter_lines()):
                    out.events.append(ev)
                    out.arrivals.append(time.monotonic())
                    last_seen = time.monotonic()
                    last_id = ev.id or last_id
                    if ev.event in ("done", "error") or len(out.events) in drop_after:
                        break
        except (httpx.TransportError, httpx.HTTPStatusError):
            time.sleep(0.1)
            turn += 1
        if out.terminal is None:
            out.reconnects += 1
    return out


def follow_in_thread(url: str, headers: dict, **kwargs) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def run():
        try:
            box["result"] = follow(url, headers, **kwargs)
        except Exception as exc:  # surfaced by the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box
