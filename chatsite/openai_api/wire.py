"""OpenAI's wire format: chat.completion and its chunks, text_completion and its
chunks, model and list objects."""
import json

from chatsite.openai_api import logprobs_wire
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


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def _base(run: GenerationRun, obj: str) -> dict:
    return {"id": completion_id(run), "object": obj, "created": int(run.queued_at.timestamp()),
            "model": run.pool.name, "system_fingerprint": None}


def completion(run: GenerationRun) -> dict:
    """A finished run as a chat.completion object."""
    choice = {"index": 0, "message": {"role": "assistant", "content": run.assistant_message.content,
                                      "refusal": None},
              "logprobs": logprobs_wire.chat(run.logprobs) if logprobs_wire.asked(run) else None,
              "finish_reason": finish_reason(run.finish_reason)}
    return {**_base(run, "chat.completion"), "choices": [choice],
            "usage": usage(run.prompt_tokens, run.completion_tokens)}


def chunk(run: GenerationRun, *, delta: dict, finish: str | None = None, include_usage: bool = False,
          logprobs: dict | None = None) -> dict:
    body = {**_base(run, "chat.completion.chunk"),
            "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}
    if include_usage:
        body["usage"] = None  # as OpenAI does: null on every chunk but the last
    return body


def usage_chunk(run: GenerationRun, prompt_tokens: int, completion_tokens: int) -> dict:
    return {**_base(run, "chat.completion.chunk"), "choices": [], "usage": usage(prompt_tokens, completion_tokens)}


def text_completion_id(run: GenerationRun) -> str:
    return f"cmpl-{run.pk}"


def _text_base(run: GenerationRun) -> dict:
    return {"id": text_completion_id(run), "object": "text_completion", "created": int(run.queued_at.timestamp()),
            "model": run.pool.name, "system_fingerprint": None}


def text_completion(run: GenerationRun) -> dict:
    """A finished run as a text_completion object."""
    choice = {"text": run.assistant_message.content, "index": 0,
              "logprobs": logprobs_wire.text(run.logprobs) if logprobs_wire.asked(run) else None,
              "finish_reason": finish_reason(run.finish_reason)}
    return {**_text_base(run), "choices": [choice], "usage": usage(run.prompt_tokens, run.completion_tokens)}


def text_chunk(run: GenerationRun, *, text: str, finish: str | None = None, include_usage: bool = False,
               logprobs: dict | None = None) -> dict:
    """A streamed text_completion: the same object, with the new text in choices[0].text."""
    body = {**_text_base(run), "choices": [{"text": text, "index": 0, "logprobs": logprobs,
                                            "finish_reason": finish}]}
    if include_usage:
        body["usage"] = None
    return body


def text_usage_chunk(run: GenerationRun, prompt_tokens: int, completion_tokens: int) -> dict:
    return {**_text_base(run), "choices": [], "usage": usage(prompt_tokens, completion_tokens)}


class ChatShape:
    """How a chat completion is written: the whole object, and its stream's chunks."""

    def whole(self, run: GenerationRun) -> dict:
        return completion(run)

    def opening(self, run: GenerationRun, include_usage: bool) -> list[dict]:
        return [chunk(run, delta={"role": "assistant", "content": ""}, include_usage=include_usage)]

    def piece(self, run: GenerationRun, text: str, include_usage: bool, *, logprobs=None, offset: int = 0) -> dict:
        """A chunk of new text; `logprobs` (a list, or None when not asked for) are its
        tokens', `offset` the characters streamed before it."""
        lp = None if logprobs is None else logprobs_wire.chat(logprobs)
        return chunk(run, delta={"content": text}, include_usage=include_usage, logprobs=lp)

    def finish(self, run: GenerationRun, reason: str, include_usage: bool) -> dict:
        return chunk(run, delta={}, finish=finish_reason(reason), include_usage=include_usage)

    def usage(self, run: GenerationRun, prompt_tokens: int, completion_tokens: int) -> dict:
        return usage_chunk(run, prompt_tokens, completion_tokens)

    # A stream's chunks for one entry's text, and for its end: one each here; a tool
    # run's reader (tools_wire.ToolChatShape) holds text back and sends calls.
    def pieces(self, run: GenerationRun, text: str, include_usage: bool, *, logprobs=None,
               offset: int = 0) -> list[dict]:
        return [self.piece(run, text, include_usage, logprobs=logprobs, offset=offset)]

    def finishing(self, run: GenerationRun, reason: str, include_usage: bool) -> list[dict]:
        return [self.finish(run, reason, include_usage)]


class TextShape(ChatShape):
    """A text completion: no role chunk first; the text is in choices[0].text."""

    def whole(self, run: GenerationRun) -> dict:
        return text_completion(run)

    def opening(self, run: GenerationRun, include_usage: bool) -> list[dict]:
        return []

    def piece(self, run: GenerationRun, text: str, include_usage: bool, *, logprobs=None, offset: int = 0) -> dict:
        lp = None if logprobs is None else logprobs_wire.text(logprobs, offset=offset)
        return text_chunk(run, text=text, include_usage=include_usage, logprobs=lp)

    def finish(self, run: GenerationRun, reason: str, include_usage: bool) -> dict:
        return text_chunk(run, text="", finish=finish_reason(reason), include_usage=include_usage)

    def usage(self, run: GenerationRun, prompt_tokens: int, completion_tokens: int) -> dict:
        return text_usage_chunk(run, prompt_tokens, completion_tokens)


CHAT, TEXT = ChatShape(), TextShape()


def sse_data(payload: dict) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


SSE_DONE = b"data: [DONE]\n\n"
SSE_KEEPALIVE = b": keep-alive\n\n"


def model_object(pool) -> dict:
    return {"id": pool.name, "object": "model", "created": int(pool.created_at.timestamp()), "owned_by": OWNED_BY}


def model_list(pools) -> dict:
    return {"object": "list", "data": [model_object(p) for p in pools]}
