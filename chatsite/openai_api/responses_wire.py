"""The Responses API's wire format: the response object, its output message, and
one server-sent event.

A response object is built from two things only: what never changes once the run
is admitted (`echo`: ids, model, sampling, instructions, metadata) and where the
run is (queued, running, or its saved text and terminal entry). So the same run
gives the same bytes whoever asks and whenever: a stream, its resume and a
retrieve agree."""
import json

from chatsite.openai_api import logprobs_wire
from chatsite.runs.stream import codec

RESPONSE_PREFIX, ITEM_PREFIX = "resp_", "msg_"
# The platform's finish reasons as a response's status (and its message item's status).
STATUS_OF = {"stop": ("completed", "completed"), "length": ("incomplete", "incomplete"),
             "budget": ("incomplete", "incomplete"), "cancelled": ("cancelled", "incomplete")}
INCOMPLETE_REASON = {"length": "max_output_tokens", "budget": "max_output_tokens"}


def response_id(run_id: int) -> str:
    """The id clients see; the number is the run's id in GET /api/runs/{id}/ and the admin."""
    return f"{RESPONSE_PREFIX}{run_id}"


def item_id(run_id: int) -> str:
    return f"{ITEM_PREFIX}{run_id}"


def run_id_of(value) -> int | None:
    """The run id in a response id `resp_<n>`, or None when it is not one."""
    if not isinstance(value, str) or not value.startswith(RESPONSE_PREFIX):
        return None
    digits = value[len(RESPONSE_PREFIX):]
    return int(digits) if digits.isdigit() and len(digits) <= 18 else None


def echo(run, record) -> dict:
    """The fields of a response object fixed at admission, in OpenAI's order."""
    return {"id": response_id(run.pk), "created_at": int(run.queued_at.timestamp()), "background": record.background,
            "instructions": record.instructions, "max_output_tokens": run.max_tokens, "model": run.pool.name,
            "previous_response_id": response_id(record.previous_run_id) if record.previous_run_id else None,
            "temperature": run.sampling.get("temperature"), "top_p": run.sampling.get("top_p"),
            "metadata": record.metadata}


def usage(input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> dict:
    """The Responses usage; `cached_tokens`: the input tokens the engine's prefix cache served."""
    return {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached_tokens},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens}


def token_logprobs(items) -> list:
    """A run's [token, logprob, top] triples as the Responses API's logprobs list."""
    return logprobs_wire.chat(items)["content"]


def text_part(text: str, logprobs=None) -> dict:
    """The output_text part; `logprobs` its tokens' (asked for with include
    message.output_text.logprobs), else []."""
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": token_logprobs(logprobs)}


def message_item(run_id: int, status: str, text: str | None, logprobs=None) -> dict:
    """The one output item: the assistant's message (no content part yet when `text` is None)."""
    return {"type": "message", "id": item_id(run_id), "status": status, "role": "assistant",
            "content": [] if text is None else [text_part(text, logprobs)]}


def response_object(base: dict, *, status: str, output: list, usage: dict | None = None, error: dict | None = None,
                    incomplete_reason: str | None = None) -> dict:
    b = base
    return {"id": b["id"], "object": "response", "created_at": b["created_at"], "status": status,
            "background": b["background"], "error": error,
            "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
            "instructions": b["instructions"], "max_output_tokens": b["max_output_tokens"], "model": b["model"],
            "output": output, "parallel_tool_calls": False, "previous_response_id": b["previous_response_id"],
            "reasoning": {"effort": None, "summary": None}, "store": True, "temperature": b["temperature"],
            "text": {"format": {"type": "text"}}, "tool_choice": "none", "tools": [], "top_p": b["top_p"],
            "truncation": "disabled", "usage": usage, "user": None, "metadata": b["metadata"]}


def pending_object(base: dict, status: str) -> dict:
    """A response not finished yet: `status` queued or in_progress, no output."""
    return response_object(base, status=status, output=[])


def finished_object(base: dict, run_id: int, *, text: str, output_tokens: int, terminal: codec.Entry,
                    logprobs=None) -> dict:
    """A finished response from its reply's text (and its tokens' logprobs, if asked
    for) and its run's terminal entry."""
    if terminal.type == codec.ERROR:
        return response_object(base, status="failed", output=[],
                               error={"code": terminal.code, "message": terminal.message})
    status, item_status = STATUS_OF.get(terminal.finish_reason, ("completed", "completed"))
    prompt_tokens = int(terminal.usage.get("prompt_tokens", 0))
    return response_object(base, status=status, output=[message_item(run_id, item_status, text, logprobs)],
                           usage=usage(prompt_tokens, output_tokens, int(terminal.usage.get("cached_tokens", 0))),
                           incomplete_reason=INCOMPLETE_REASON.get(terminal.finish_reason))


def sse_event(payload: dict) -> bytes:
    """One event: `event: <type>` and its JSON (compact, keys in the order made)."""
    return f"event: {payload['type']}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


SSE_KEEPALIVE = b": keep-alive\n\n"
