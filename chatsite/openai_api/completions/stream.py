"""The chunks of one completion call's stream, entry by entry, in its endpoint's shape
(wire.ChatShape, tools_wire.ToolChatShape) with what the call asked for beyond it
(completion_extras). The view follows the runs' streams and writes what this makes."""
from chatsite.openai_api.completions import logprobs as logprobs_wire
from chatsite.openai_api.completions import wire
from chatsite.openai_api.completions.extras import Extras, usage_so_far
from chatsite.runs.models import GenerationRun
from chatsite.runs.stream.codec import Entry


class CompletionStream:
    """A call's runs: `n` choices for each of its prompts, prompt by prompt (index
    `p * n + j`); the first names the completion."""

    def __init__(self, runs: list[GenerationRun], shape: wire.ChatShape, include_usage: bool, *, n: int):
        self.runs, self.run, self.shape, self.include_usage, self.n = runs, runs[0], shape, include_usage, n
        self.extras = Extras(runs, text=isinstance(shape, wire.TextShape), include_usage=include_usage)
        self.logprobs = logprobs_wire.asked(self.run)
        self.chars = [0] * len(runs)  # each choice's characters so far (text completions' logprob offsets)
        self.completion = [0] * len(runs)  # each choice's tokens so far
        self.prompt = [0] * len(runs)  # each choice's prompt tokens, once known
        self.cached = [0] * len(runs)
        self.open = len(runs)  # choices not finished
        # No token ids and no usage on each chunk asked for: once a choice's first entry has said its
        # prompt's details, its chunks are its pieces (every token of a plain call takes this way).
        self.plain = not (self.extras.ids or self.extras.continuous)

    def opening(self) -> list[dict]:
        """Every choice's opening chunks, sent at once with the headers."""
        return [chunk for index in range(len(self.runs))
                for chunk in self.extras.opening(self.shape.opening(self.run, self.include_usage, index), index)]

    def token(self, index: int, entry: Entry) -> list[dict]:
        """The chunks of a token (or snapshot) entry of choice `index`."""
        extra = entry.extra or {}
        if not self.extras.prompted[index]:  # its first entry: where its text starts, its prompt's size
            self.chars[index] = self.extras.text_offset(index, extra)
            self.prompt[index] = int(extra.get("prompt_tokens", 0))
        self.completion[index] += entry.n
        if self.logprobs:
            pieces = self.shape.pieces(self.run, entry.text, self.include_usage, index,
                                       logprobs=entry.logprobs or [], offset=self.chars[index])
            self.chars[index] += len(entry.text)
        else:
            pieces = self.shape.pieces(self.run, entry.text, self.include_usage, index)
        if self.plain and self.extras.prompted[index]:
            return pieces
        return self.extras.entry(pieces, index, extra, self._so_far(index))

    def done(self, index: int, entry: Entry) -> list[dict]:
        """The chunks that finish choice `index`; after the last choice, the usage chunk
        when it is asked for."""
        out = self.extras.prompt_said(index, {})  # a choice that ended before any text still echoes its prompt
        out += self.shape.finishing(self.run, entry.finish_reason, self.include_usage, index)
        self.prompt[index] = int(entry.usage.get("prompt_tokens", 0))
        self.cached[index] = int(entry.usage.get("cached_tokens", 0))
        if self.extras.continuous:
            for chunk in out:
                chunk["usage"] = self._so_far(index)
        self.open -= 1
        if self.include_usage and not self.open:
            out.append(self.shape.usage(self.run, *self._totals()))
        return out

    def _so_far(self, index: int) -> dict | None:
        return usage_so_far(self.prompt[index], self.completion[index]) if self.extras.continuous else None

    def _totals(self) -> tuple[int, int, int]:
        """(prompt, completion, cached) tokens of the call: each prompt counted once, its
        cached tokens those of its first choice (the one billed for it), as choices_usage."""
        groups = [range(start, min(start + self.n, len(self.runs))) for start in range(0, len(self.runs), self.n)]
        return (sum(max(self.prompt[i] for i in group) for group in groups), sum(self.completion),
                sum(self.cached[group[0]] for group in groups))
