"""What a completion call asked for beyond OpenAI's plain answer, added to the objects
wire.py and tools_wire.py make: the prompt echoed before each choice's text (with its
log probabilities: what scoring harnesses read), a chat reply's prefill echoed, and
vLLM's extras (token ids, prompt log probabilities, usage on every chunk).

What was asked is read from the first run's sampling (a call's choices and prompts
ask alike); what the engine reported, from the runs' record (a whole answer) or the
stream's first token entry (a stream), so a replay and a stream read again agree."""
from chatsite.openai_api.completions import logprobs as logprobs_wire
from chatsite.openai_api.completions import wire
from chatsite.runs.models import GenerationRun


def prompt_of(run: GenerationRun, extra: dict | None = None) -> str:
    """A text completion's prompt as the engine read it: a token-id prompt's decoded
    text (reported with its first entry), else the text sent."""
    return (extra or {}).get("prompt_text") or (run.details or {}).get("prompt_text") or run.prompt_snapshot[-1][
        "content"]


def prefill_of(run: GenerationRun) -> str:
    """The reply a chat run carries on (a conversation that ended with the assistant's
    message), or ""."""
    last = run.prompt_snapshot[-1] if run.prompt_snapshot else {}
    carried_on = last.get("role") == "assistant" and run.sampling.get("add_generation_prompt") is not True
    return last["content"] if carried_on else ""


class Extras:
    """A call's extras, for its whole answer (`whole`) or its stream (the other methods,
    one Extras per stream: it keeps which choices have had their prompt said)."""

    def __init__(self, runs: list[GenerationRun], *, text: bool, include_usage: bool = False):
        s = runs[0].sampling or {}
        self.runs, self.text = runs, text
        self.echo = bool(s.get("echo"))
        self.ids = bool(s.get("return_token_ids"))
        self.prompt_logprobs = s.get("prompt_logprobs") is not None
        self.as_ids = bool(s.get("return_tokens_as_token_ids"))
        self.logprobs = s.get("logprobs") is not None
        self.continuous = include_usage and bool(s.get("continuous_usage_stats"))
        self.prompted = [False] * len(runs)  # a choice's prompt details said (its first entry)

    # --- the whole answer -----------------------------------------------------------
    def whole(self, body: dict) -> dict:
        if not (self.echo or self.ids or self.prompt_logprobs):
            return body
        for choice, run in zip(body["choices"], self.runs):
            details = run.details or {}
            if self.text:
                self._text_choice(choice, run, details)
            else:
                if self.echo and (prefill := prefill_of(run)):
                    choice["message"]["content"] = prefill + (choice["message"]["content"] or "")
                if self.ids:
                    choice["token_ids"] = details.get("ids", [])
        if not self.text:  # a chat completion has one prompt: said once, as vLLM does
            details = self.runs[0].details or {}
            if self.ids:
                body["prompt_token_ids"] = details.get("prompt_ids")
            if self.prompt_logprobs:
                body["prompt_logprobs"] = logprobs_wire.vllm_prompt(details.get("prompt_logprobs"))
        return body

    def _text_choice(self, choice: dict, run: GenerationRun, details: dict) -> None:
        if self.echo:
            prompt = prompt_of(run)
            choice["text"] = prompt + choice["text"]
            if choice.get("logprobs") is not None:
                choice["logprobs"] = logprobs_wire.joined(self._prompt_legacy(details), _shifted(
                    choice["logprobs"], len(prompt)))
        self._vllm_fields(choice, details, details.get("ids", []))

    def _prompt_legacy(self, extra: dict) -> dict:
        return logprobs_wire.prompt_text_logprobs(extra.get("prompt_logprobs"), extra.get("prompt_first"),
                                                  as_ids=self.as_ids)

    def _vllm_fields(self, choice: dict, extra: dict, ids: list | None) -> None:
        """A text choice's (or chunk's) vLLM fields: its tokens' ids, and the prompt's."""
        if self.ids:
            choice["token_ids"] = ids
            choice["prompt_token_ids"] = extra.get("prompt_ids")
        if self.prompt_logprobs and "prompt_logprobs" in extra:
            choice["prompt_logprobs"] = logprobs_wire.vllm_prompt(extra["prompt_logprobs"])

    # --- a stream -------------------------------------------------------------------
    def opening(self, chunks: list[dict], index: int) -> list[dict]:
        """A chat stream's opening chunks of choice `index`: the prefill echoed as content."""
        if self.echo and not self.text and chunks and (prefill := prefill_of(self.runs[index])):
            chunks[0]["choices"][0]["delta"]["content"] = prefill
        return chunks

    def entry(self, chunks: list[dict], index: int, extra: dict | None, usage: dict | None) -> list[dict]:
        """The chunks of one token entry of choice `index`: its ids on the first, the
        prompt's details on the choice's first entry (a text completion's echo before
        them), and `usage` so far on each when it is asked for."""
        extra = extra or {}
        if chunks and self.ids:
            _choice(chunks[0])["token_ids"] = extra.get("ids", [])
        if not self.prompted[index]:
            chunks = self.prompt_said(index, extra) + chunks
        if self.continuous:
            for chunk in chunks:
                chunk["usage"] = usage
        return chunks

    def prompt_said(self, index: int, extra: dict) -> list[dict]:
        """What is said of choice `index`'s prompt before its first text: a text
        completion's echo (a chunk of its own) and vLLM's prompt fields; [] once said."""
        if self.prompted[index]:
            return []
        self.prompted[index] = True
        run = self.runs[index]
        if self.text and self.echo:
            prompt = prompt_of(run, extra)
            legacy = self._prompt_legacy(extra) if self.logprobs else None
            chunk = wire.text_chunk(self.runs[0], text=prompt, index=index, logprobs=legacy)
            self._vllm_fields(chunk["choices"][0], extra, [])
            return [chunk]
        if self.text:
            return []
        if self.ids or self.prompt_logprobs:  # a chat stream's first chunk says the prompt's, as vLLM's
            chunk = wire.chunk(self.runs[0], delta={}, index=index)
            if self.ids:
                chunk["prompt_token_ids"] = extra.get("prompt_ids")
            if self.prompt_logprobs:
                chunk["prompt_logprobs"] = logprobs_wire.vllm_prompt(extra.get("prompt_logprobs"))
            return [chunk]
        return []

    def text_offset(self, index: int, extra: dict | None) -> int:
        """Where a text choice's completion starts in its legacy logprobs' offsets: after
        its echoed prompt, if any."""
        return len(prompt_of(self.runs[index], extra)) if self.text and self.echo else 0


def _choice(chunk: dict) -> dict:
    return chunk["choices"][0]


def _shifted(logprobs: dict, by: int) -> dict:
    return {**logprobs, "text_offset": [offset + by for offset in logprobs["text_offset"]]}


def usage_so_far(prompt_tokens: int, completion_tokens: int) -> dict:
    """vLLM's continuous usage: the prompt and the tokens streamed so far."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}
