"""A response's event stream, numbered from the run stream so that a resume is byte-exact.

The events and their `sequence_number`s follow from what `follow()` yields alone:
0-3 the opening events (created, in_progress, output_item.added,
content_part.added), then one output_text.delta per token entry in stream order,
then the closing events (output_text.done, content_part.done, output_item.done,
and response.completed or response.incomplete), or response.failed alone when the
run failed. Reading the same stream again gives the same events with the same
numbers and bytes, so `starting_after=N` is the full stream with events 0..N left
out. A run whose stream has expired is read back from Postgres as one SNAPSHOT
entry: its whole text in one delta (so its numbering differs from the live one's).

A stream whose entries were lost (a Redis restart without persistence) is written
again from token 0 by a later attempt, coalesced differently and maybe sampled
differently: event N of the lost life is not event N of the new one. So each life
numbers its events after the opening ones from its own base, set by the attempt that
wrote its first token (`LIFE_EVENTS` apart: a lost life's numbers are never the next
one's), and a client resuming from another life's number is told to start over
(`restarted`), never sent the new life's text after the old one's.
"""
from chatsite.openai_api import responses_wire as wire
from chatsite.runs.stream import codec

OPENING_EVENTS = 4
# The numbers one life of the stream has for its events after the opening ones: more than
# a reply has tokens. Life a (its first token's attempt) starts at OPENING_EVENTS +
# (a - 1) * LIFE_EVENTS, so life 1, nearly every run's only one, counts 0, 1, 2, ...
LIFE_EVENTS = 1_000_000
MAX_LIFE = 999  # numbers stay under 10**9, the most `starting_after` takes


class ResponseEvents:
    """The events of one response, as encoded SSE bytes with their numbers."""

    def __init__(self, base: dict, run_id: int, *, logprobs: bool = False):
        self.base, self.run_id, self.item_id = base, run_id, wire.item_id(run_id)
        self.seq = 0
        self.life: int | None = None  # the stream's life, once its first entry is read
        self.text = ""
        self.output_tokens = 0
        # The run asked for logprobs: the tokens' so far (each delta carries its own), else None.
        self.logprobs: list | None = [] if logprobs else None

    def _event(self, type: str, **fields) -> tuple[int, bytes]:
        n, self.seq = self.seq, self.seq + 1
        return n, wire.sse_event({"type": type, "sequence_number": n, **fields})

    def _where(self) -> dict:
        return {"item_id": self.item_id, "output_index": 0, "content_index": 0}

    def opening(self) -> list[tuple[int, bytes]]:
        created = "queued" if self.base["background"] else "in_progress"
        return [
            self._event("response.created", response=wire.pending_object(self.base, created)),
            self._event("response.in_progress", response=wire.pending_object(self.base, "in_progress")),
            self._event("response.output_item.added", output_index=0,
                        item=wire.message_item(self.run_id, "in_progress", None)),
            self._event("response.content_part.added", **self._where(), part=wire.text_part("")),
        ]

    def feed(self, entry: codec.Entry) -> list[tuple[int, bytes]]:
        """The events an entry of the run stream makes (none for an empty snapshot)."""
        if self.life is None:  # the stream's first entry: a token's attempt names its life
            self.life = min(entry.attempt, MAX_LIFE) if entry.type == codec.TOKEN else 1
            self.seq += (self.life - 1) * LIFE_EVENTS
        if entry.type == codec.TOKEN:
            self.text += entry.text
            self.output_tokens += entry.n
            return [self._event("response.output_text.delta", **self._where(), delta=entry.text,
                                logprobs=self._take(entry.logprobs))]
        if entry.type == codec.SNAPSHOT:  # the whole saved text, in place of what came before
            delta = entry.text[len(self.text):] if entry.text.startswith(self.text) else entry.text
            taken = 0 if self.logprobs is None or delta == entry.text else len(self.logprobs)
            if self.logprobs is not None:
                self.logprobs = self.logprobs[:taken]
            self.text, self.output_tokens = entry.text, entry.n
            return [self._event("response.output_text.delta", **self._where(), delta=delta,
                                logprobs=self._take((entry.logprobs or [])[taken:]))] if delta else []
        final = wire.finished_object(self.base, self.run_id, text=self.text, output_tokens=self.output_tokens,
                                     terminal=entry, logprobs=self.logprobs)
        if entry.type == codec.ERROR:
            return [self._event("response.failed", response=final)]
        item = final["output"][0]
        return [
            self._event("response.output_text.done", **self._where(), text=self.text,
                        logprobs=wire.token_logprobs(self.logprobs)),
            self._event("response.content_part.done", **self._where(), part=wire.text_part(self.text, self.logprobs)),
            self._event("response.output_item.done", output_index=0, item=item),
            self._event("response.completed" if final["status"] == "completed" else "response.incomplete",
                        response=final),
        ]

    def _take(self, items) -> list:
        """A delta's logprobs in the wire shape, kept for the closing events ([] when not asked for)."""
        if self.logprobs is None or not items:
            return []
        self.logprobs.extend(items)
        return wire.token_logprobs(items)

    def holds(self, after: int) -> bool:
        """Whether a client that had the events up to number `after` had them from this
        life of the stream (an opening event is the same in every life). True until the
        stream's first entry has been fed."""
        return after < OPENING_EVENTS or self.life is None or (after - OPENING_EVENTS) // LIFE_EVENTS + 1 == self.life

    def restarted(self) -> bytes:
        """An `error` event for a client resuming from a number of another life of the
        stream: what it has is not this response's text, so it starts over."""
        return self._event("error", code="stream_restarted", param="starting_after",
                           message=f"the events you had are gone: the response's stream was lost and is "
                                   f"written again from the start; stream it again without starting_after, "
                                   f"or GET /v1/responses/{self.base['id']}")[1]

    def broken(self, message: str, code: str = "stream_failed") -> bytes:
        """An `error` event: reading the stream failed, or the key was revoked meanwhile
        (the run goes on and is saved)."""
        return self._event("error", code=code, message=message, param=None)[1]
