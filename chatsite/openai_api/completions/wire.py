"""OpenAI's wire format: chat.completion and its chunks, text_completion and its
chunks, model and list objects."""
import json

from chatsite.openai_api.completions import logprobs as logprobs_wire
from chatsite.runs.models import GenerationRun

OWNED_BY = "chatsite"
# The platform's finish reasons in OpenAI's vocabulary: a budget stop is a length
# stop; a cancelled run (stopped through the REST API) ended like a stop sequence.
FINISH_REASONS = {"stop": "stop", "length": "length", "budget": "length", "cancelled": "stop"}


def completion_id(run: GenerationRun) -> str:
    """The id OpenAI clients see; the number is the run's id in the REST API and admin."""
    return f"chatcmpl-{run.pk}"


def finish_reason(reason: str) -> str:
    return FINISH_REASONS.get(reason, "stop")


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> dict:
    """OpenAI's usage; `cached_tokens`: the prompt tokens the engine's prefix cache served."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0}}


def cached_tokens(run: GenerationRun) -> int:
    """The run's prompt tokens its engine's prefix cache served (saved at finalize)."""
    return (run.details or {}).get("cached_tokens", 0)


def _base(run: GenerationRun, obj: str) -> dict:
    return {"id": completion_id(run), "object": obj, "created": int(run.queued_at.timestamp()),
            "model": run.pool.name, "system_fingerprint": None}


def prompt_groups(runs: list[GenerationRun]) -> list[list[GenerationRun]]:
    """A completion's runs by prompt (a text completion may have several): each prompt's
    choices, its first (choice_index 0) first."""
    groups: list[list[GenerationRun]] = []
    for run in runs:
        if run.choice_index == 0 or not groups:
            groups.append([])
        groups[-1].append(run)
    return groups


def choices_usage(runs: list[GenerationRun]) -> dict:
    """The usage of a completion's finished choices: each prompt counted once, as its
    choices share it (a choice cancelled before it started read no prompt: it records 0),
    and its cached tokens those of the choice that was billed for it, its first."""
    groups = prompt_groups(runs)
    return usage(sum(max(run.prompt_tokens for run in group) for group in groups),
                 sum(run.completion_tokens for run in runs), sum(cached_tokens(group[0]) for group in groups))


def completion(runs: list[GenerationRun]) -> dict:
    """A completion's finished runs (its choices, in index order) as a chat.completion object."""
    choices = [{"index": i, "message": {"role": "assistant", "content": run.assistant_message.content,
                                        "refusal": None},
                "logprobs": logprobs_wire.chat(run.logprobs) if logprobs_wire.asked(run) else None,
                "finish_reason": finish_reason(run.finish_reason)} for i, run in enumerate(runs)]
    return {**_base(runs[0], "chat.completion"), "choices": choices, "usage": choices_usage(runs)}


def chunk(run: GenerationRun, *, delta: dict, finish: str | None = None, include_usage: bool = False,
          index: int = 0, logprobs: dict | None = None) -> dict:
    body = {**_base(run, "chat.completion.chunk"),
            "choices": [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}
    if include_usage:
        body["usage"] = None  # as OpenAI does: null on every chunk but the last
    return body


def usage_chunk(run: GenerationRun, prompt_tokens: int, completion_tokens: int, cached: int = 0) -> dict:
    return {**_base(run, "chat.completion.chunk"), "choices": [],
            "usage": usage(prompt_tokens, completion_tokens, cached)}


def text_completion_id(run: GenerationRun) -> str:
    return f"cmpl-{run.pk}"


def _text_base(run: GenerationRun) -> dict:
    return {"id": text_completion_id(run), "object": "text_completion", "created": int(run.queued_at.timestamp()),
            "model": run.pool.name, "system_fingerprint": None}


def text_completion(runs: list[GenerationRun]) -> dict:
    """A completion's finished runs (its choices, in index order) as a text_completion object."""
    choices = [{"text": run.assistant_message.content, "index": i,
                "logprobs": logprobs_wire.text(run.logprobs) if logprobs_wire.asked(run) else None,
                "finish_reason": finish_reason(run.finish_reason)} for i, run in enumerate(runs)]
    return {**_text_base(runs[0]), "choices": choices, "usage": choices_usage(runs)}


def text_chunk(run: GenerationRun, *, text: str, finish: str | None = None, include_usage: bool = False,
               index: int = 0, logprobs: dict | None = None) -> dict:
    """A streamed text_completion: the same object, with the new text in choices[0].text
    (`index` the choice it belongs to)."""
    body = {**_text_base(run), "choices": [{"text": text, "index": index, "logprobs": logprobs,
                                            "finish_reason": finish}]}
    if include_usage:
        body["usage"] = None
    return body


def text_usage_chunk(run: GenerationRun, prompt_tokens: int, completion_tokens: int, cached: int = 0) -> dict:
    return {**_text_base(run), "choices": [], "usage": usage(prompt_tokens, completion_tokens, cached)}


class ChatShape:
    """How a chat completion is written: the whole object, and its stream's chunks.
    `run` is the completion's first choice (it names the completion); `index` the
    choice a chunk belongs to."""

    def whole(self, runs: list[GenerationRun]) -> dict:
        return completion(runs)

    def opening(self, run: GenerationRun, include_usage: bool, index: int = 0) -> list[dict]:
        return [chunk(run, delta={"role": "assistant", "content": ""}, include_usage=include_usage, index=index)]

    def piece(self, run: GenerationRun, text: str, include_usage: bool, index: int = 0, *, logprobs=None,
              offset: int = 0) -> dict:
        """A chunk of new text of choice `index`; `logprobs` (a list, or None when not asked
        for) are its tokens', `offset` the characters of that choice streamed before it."""
        lp = None if logprobs is None else logprobs_wire.chat(logprobs)
        return chunk(run, delta={"content": text}, include_usage=include_usage, index=index, logprobs=lp)

    def finish(self, run: GenerationRun, reason: str, include_usage: bool, index: int = 0) -> dict:
        return chunk(run, delta={}, finish=finish_reason(reason), include_usage=include_usage, index=index)

    def usage(self, run: GenerationRun, prompt_tokens: int, completion_tokens: int, cached: int = 0) -> dict:
        return usage_chunk(run, prompt_tokens, completion_tokens, cached)

    # A stream's chunks for one entry's text, and for its end: one each here; a tool
    # run's reader (tools_wire.ToolChatShape) holds text back and sends calls.
    def pieces(self, run: GenerationRun, text: str, include_usage: bool, index: int = 0, *, logprobs=None,
               offset: int = 0) -> list[dict]:
        return [self.piece(run, text, include_usage, index, logprobs=logprobs, offset=offset)]

    def finishing(self, run: GenerationRun, reason: str, include_usage: bool, index: int = 0) -> list[dict]:
        return [self.finish(run, reason, include_usage, index)]


class TextShape(ChatShape):
    """A text completion: no role chunk first; the text is in choices[0].text."""

    def whole(self, runs: list[GenerationRun]) -> dict:
        return text_completion(runs)

    def opening(self, run: GenerationRun, include_usage: bool, index: int = 0) -> list[dict]:
        return []

    def piece(self, run: GenerationRun, text: str, include_usage: bool, index: int = 0, *, logprobs=None,
              offset: int = 0) -> dict:
        lp = None if logprobs is None else logprobs_wire.text(logprobs, offset=offset)
        return text_chunk(run, text=text, include_usage=include_usage, index=index, logprobs=lp)

    def finish(self, run: GenerationRun, reason: str, include_usage: bool, index: int = 0) -> dict:
        return text_chunk(run, text="", finish=finish_reason(reason), include_usage=include_usage, index=index)

    def usage(self, run: GenerationRun, prompt_tokens: int, completion_tokens: int, cached: int = 0) -> dict:
        return text_usage_chunk(run, prompt_tokens, completion_tokens, cached)


CHAT, TEXT = ChatShape(), TextShape()


def sse_data(payload: dict) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


SSE_DONE = b"data: [DONE]\n\n"
SSE_KEEPALIVE = b": keep-alive\n\n"


def model_object(pool) -> dict:
    return {"id": pool.name, "object": "model", "created": int(pool.created_at.timestamp()), "owned_by": OWNED_BY}


def model_list(pools) -> dict:
    return {"object": "list", "data": [model_object(p) for p in pools]}
