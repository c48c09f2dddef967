"""A small SSE client for tests: reads a run's events like a browser would."""
import json
from dataclasses import dataclass

import httpx

from bench.sse_client import LineParser


@dataclass
class Event:
    id: str | None
    event: str
    data: dict


def parse(lines) -> "iter[Event]":
    parser = LineParser()
    for line in lines:
        done = parser.feed(line)
        if done is not None:
            event_id, kind, data = done
            yield Event(event_id, kind, json.loads(data))


def read_events(url: str, *, headers: dict | None = None, last_event_id: str | None = None,
                max_events: int | None = None, timeout: float = 60) -> list[Event]:
    """Events until the terminal one, or until `max_events` (then the connection is dropped)."""
    headers = dict(headers or {})
    if last_event_id:
        headers["Last-Event-ID"] = last_event_id
    out: list[Event] = []
    with httpx.stream("GET", url, headers=headers, timeout=timeout) as resp:
        resp.raise_for_status()
        for ev in parse(resp.iter_lines()):
            out.append(ev)
            if ev.event in ("done", "error") or (max_events is not None and len(out) >= max_events):
                break
    return out


def text_of(events: list[Event]) -> str:
    """The reply the events spell (a snapshot replaces what came before)."""
    text = ""
    for ev in events:
        if ev.event == "token":
            text += ev.data["text"]
        elif ev.event == "snapshot":
            text = ev.data["text"]
    return text
