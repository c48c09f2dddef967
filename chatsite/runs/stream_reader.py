"""Reading a run's stream back: the reply is rebuilt from the log, not trusted from a worker."""
from dataclasses import dataclass

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs import events
from chatsite.runs.events import Entry


class StreamCorrupt(Exception):
    """The token entries of a stream skip a sequence number."""


@dataclass
class Reply:
    text: str = ""
    completion_tokens: int = 0  # also the next seq to write
    terminal: Entry | None = None
    first_token_ms: int | None = None
    last_token_ms: int | None = None
    exists: bool = False


def read_entries(run_id: int) -> list[Entry]:
    """Every entry of the run's stream, in order ([] when the stream is gone)."""
    return [events.decode(eid, fields) for eid, fields in get_redis().xrange(redis_keys.run_stream(run_id))]


def rebuild(entries: list[Entry]) -> Reply:
    """The reply the entries spell. Entries repeating already-seen tokens are
    skipped; a gap in `seq` raises StreamCorrupt."""
    reply = Reply(exists=bool(entries))
    parts: list[str] = []
    for entry in entries:
        if entry.is_terminal:
            reply.terminal = reply.terminal or entry
            continue
        if entry.seq + entry.n <= reply.completion_tokens:
            continue
        if entry.seq != reply.completion_tokens:
            raise StreamCorrupt(f"token entry {entry.id} starts at seq {entry.seq}, expected {reply.completion_tokens}")
        parts.append(entry.text)
        reply.completion_tokens += entry.n
        ms = int(entry.id.split("-")[0])
        reply.first_token_ms = reply.first_token_ms or ms
        reply.last_token_ms = ms
    reply.text = "".join(parts)
    return reply


def read_reply(run_id: int) -> Reply:
    return rebuild(read_entries(run_id))
