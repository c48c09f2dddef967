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
from chatsite.openai_api.responses import wire
from chatsite.openai_api.tools.reader import ArgumentsDelta, Call, Content, ReplyReader
from chatsite.openai_api.tools.wire import call_id_prefix_of
from chatsite.runs.stream import codec

OPENING_EVENTS = 4
# The numbers one life of the stream has for its events after the opening ones: more than
# a reply has tokens. Life a (its first token's attempt) starts at OPENING_EVENTS +
# (a - 1) * LIFE_EVENTS, so life 1, nearly every run's only one, counts 0, 1, 2, ...
LIFE_EVENTS = 1_000_000
MAX_SEQUENCE = 10**9 - 1  # the most `starting_after` takes
MAX_LIFE = 999  # numbers stay under MAX_SEQUENCE


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
        return self._begun() + [
            self._event("response.output_item.added", output_index=0,
                        item=wire.message_item(self.run_id, "in_progress", None)),
            self._event("response.content_part.added", **self._where(), part=wire.text_part("")),
        ]

    def _begun(self) -> list[tuple[int, bytes]]:
        created = "queued" if self.base["background"] else "in_progress"
        return [self._event("response.created", response=wire.pending_object(self.base, created)),
                self._event("response.in_progress", response=wire.pending_object(self.base, "in_progress"))]

    def feed(self, entry: codec.Entry) -> list[tuple[int, bytes]]:
        """The events an entry of the run stream makes (none for an empty snapshot)."""
        if self.life is None:  # the stream's first entry: a token's attempt names its life
            self.life = min(entry.attempt, MAX_LIFE) if entry.type == codec.TOKEN else 1
            self.seq += (self.life - 1) * LIFE_EVENTS
        if entry.type == codec.TOKEN:
            self.text += entry.text
            self.output_tokens += entry.n
            return self._said(entry.text, entry.logprobs)
        if entry.type == codec.SNAPSHOT:  # the whole saved text, in place of what came before
            return self._replaced(entry)
        final = wire.finished_object(self.base, self.run_id, text=self.text, output_tokens=self.output_tokens,
                                     terminal=entry, logprobs=self.logprobs)
        if entry.type == codec.ERROR:
            return [self._event("response.failed", response=final)]
        return self._closing(final)

    def _said(self, text: str, logprobs) -> list[tuple[int, bytes]]:
        """The events of new text of the reply (and its tokens' logprobs)."""
        return [self._event("response.output_text.delta", **self._where(), delta=text, logprobs=self._take(logprobs))]

    def _replaced(self, entry: codec.Entry) -> list[tuple[int, bytes]]:
        delta = entry.text[len(self.text):] if entry.text.startswith(self.text) else entry.text
        taken = 0 if self.logprobs is None or delta == entry.text else len(self.logprobs)
        if self.logprobs is not None:
            self.logprobs = self.logprobs[:taken]
        self.text, self.output_tokens = entry.text, entry.n
        return self._said(delta, (entry.logprobs or [])[taken:]) if delta else []

    def _closing(self, final: dict) -> list[tuple[int, bytes]]:
        """The events that end a reply that did not fail: its items done, then the response."""
        item = final["output"][0]
        return [
            self._event("response.output_text.done", **self._where(), text=self.text,
                        logprobs=wire.token_logprobs(self.logprobs)),
            self._event("response.content_part.done", **self._where(), part=wire.text_part(self.text, self.logprobs)),
            self._event("response.output_item.done", output_index=0, item=item),
            self._ended(final),
        ]

    def _ended(self, final: dict) -> tuple[int, bytes]:
        return self._event("response.completed" if final["status"] == "completed" else "response.incomplete",
                           response=final)

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


class ToolResponseEvents(ResponseEvents):
    """The events of a response whose run has tools: its output items begin as its
    reply is read (tool_calls.ReplyReader, the one reader of a tool run's text): the
    message at its first words (output_text deltas), each function call at its start
    (function_call_arguments deltas, then done). The message stays open to the end (words
    may follow a call); a call closes when the next begins, or at the end. Log
    probabilities are not streamed (the reader re-cuts the text), as on chat completions."""

    def __init__(self, base: dict, run_id: int, *, logprobs: bool = False):
        super().__init__(base, run_id)
        self.reader = ReplyReader(base["run_tools"], call_id_prefix=call_id_prefix_of(run_id))
        self.items = 0  # output items begun
        self.message_index: int | None = None
        self.message_text = ""
        self.call: tuple[int, Call, str] | None = None  # the open call: its output index, the call, its arguments

    def opening(self) -> list[tuple[int, bytes]]:
        return self._begun()  # no item until the reply says which

    def _said(self, text: str, logprobs) -> list[tuple[int, bytes]]:
        return self._read(self.reader.feed(text))

    def _replaced(self, entry: codec.Entry) -> list[tuple[int, bytes]]:
        delta = entry.text[len(self.text):] if entry.text.startswith(self.text) else entry.text
        self.text, self.output_tokens = entry.text, entry.n
        return self._said(delta, None)

    def _closing(self, final: dict) -> list[tuple[int, bytes]]:
        out = self._read(self.reader.finish())
        items = final["output"]
        if self.call is not None:
            out += self._close_call(items[self.call[0]])
        if self.message_index is not None:
            item, where = items[self.message_index], self._at(self.message_index)
            out += [self._event("response.output_text.done", **where, text=self.message_text, logprobs=[]),
                    self._event("response.content_part.done", **where, part=item["content"][0]),
                    self._event("response.output_item.done", output_index=self.message_index, item=item)]
        return out + [self._ended(final)]

    def _at(self, index: int) -> dict:
        return {"item_id": self.item_id, "output_index": index, "content_index": 0}

    def _read(self, events: list) -> list[tuple[int, bytes]]:
        out = []
        for event in events:
            if isinstance(event, Content):
                if self.message_index is None:
                    self.message_index, self.items = self.items, self.items + 1
                    out += [self._event("response.output_item.added", output_index=self.message_index,
                                        item=wire.message_item(self.run_id, "in_progress", None)),
                            self._event("response.content_part.added", **self._at(self.message_index),
                                        part=wire.text_part(""))]
                self.message_text += event.text
                out.append(self._event("response.output_text.delta", **self._at(self.message_index),
                                       delta=event.text, logprobs=[]))
            elif isinstance(event, Call):
                if self.call is not None:
                    index, call, arguments = self.call
                    out += self._close_call(wire.call_item(self.run_id, call, "completed", arguments))
                self.call, self.items = (self.items, event, event.arguments), self.items + 1
                out.append(self._event("response.output_item.added", output_index=self.call[0],
                                       item=wire.call_item(self.run_id, event, "in_progress", "")))
                if event.arguments:
                    out.append(self._arguments_delta(event.arguments))
            elif isinstance(event, ArgumentsDelta) and self.call is not None:
                index, call, arguments = self.call
                self.call = (index, call, arguments + event.text)
                out.append(self._arguments_delta(event.text))
        return out

    def _arguments_delta(self, text: str) -> tuple[int, bytes]:
        index, call, _ = self.call
        return self._event("response.function_call_arguments.delta", item_id=wire.call_item(self.run_id, call,
                                                                                            "")["id"],
                           output_index=index, delta=text)

    def _close_call(self, item: dict) -> list[tuple[int, bytes]]:
        index = self.call[0]
        self.call = None
        return [self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                            arguments=item["arguments"]),
                self._event("response.output_item.done", output_index=index, item=item)]


def events_for(base: dict, run_id: int, *, logprobs: bool) -> ResponseEvents:
    """The events of a response: its run's tools decide how its reply is read."""
    if base.get("run_tools"):
        return ToolResponseEvents(base, run_id)
    return ResponseEvents(base, run_id, logprobs=logprobs)
