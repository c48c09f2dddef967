"""The Responses API's wire format: the response object, its output message, and
one server-sent event.

A response object is built from two things only: what never changes once the run
is admitted (`echo`: ids, model, sampling, instructions, metadata) and where the
run is (queued, running, or its saved text and terminal entry). So the same run
gives the same bytes whoever asks and whenever: a stream, its resume and a
retrieve agree."""
import json

from chatsite.openai_api.completions import logprobs as logprobs_wire
from chatsite.openai_api.tools.reader import Call, Content, ReplyReader, read_events
from chatsite.openai_api.tools.wire import call_id_prefix_of
from chatsite.runs.stream import codec

RESPONSE_PREFIX, ITEM_PREFIX, CALL_ITEM_PREFIX = "resp_", "msg_", "fc_"
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
    """The fields of a response object fixed at admission, in OpenAI's order; and
    `run_tools`, the run's tools as its reply is read (tool_calls.ReplyReader), if any."""
    options = record.options or {}
    return {"id": response_id(run.pk), "created_at": int(run.queued_at.timestamp()), "background": record.background,
            "instructions": record.instructions, "max_output_tokens": run.max_tokens, "model": run.pool.name,
            "previous_response_id": response_id(record.previous_run_id) if record.previous_run_id else None,
            "temperature": run.sampling.get("temperature"), "top_p": run.sampling.get("top_p"),
            "metadata": record.metadata, "tools": options.get("tools", []),
            "tool_choice": options.get("tool_choice", "auto"),
            "parallel_tool_calls": options.get("parallel_tool_calls", True),
            "text": options.get("text", {"format": {"type": "text"}}), "store": record.stored,
            "run_tools": run.sampling.get("tools")}


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
    """The assistant's message output item (no content part yet when `text` is None)."""
    return {"type": "message", "id": item_id(run_id), "status": status, "role": "assistant",
            "content": [] if text is None else [text_part(text, logprobs)]}


def call_item(run_id: int, call: Call, status: str, arguments: str | None = None) -> dict:
    """A function_call output item: the call's id is the one a function_call_output answers."""
    return {"type": "function_call", "id": f"{CALL_ITEM_PREFIX}{run_id}_{call.index}", "call_id": call.id,
            "name": call.name, "arguments": call.arguments if arguments is None else arguments, "status": status}


def output_items(base: dict, run_id: int, status: str, text: str, logprobs=None, *, final: bool = True) -> list:
    """A reply's output items: its message, and for a run with tools, its function calls,
    in the order they began (the message only when the reply has words besides calls).
    `status`: the message's, and the last call's (the others are complete). `final`: the
    reply is whole (else what is read of it so far: a call not complete is not shown)."""
    tools = base.get("run_tools")
    if not tools:
        return [message_item(run_id, status, text, logprobs)]
    reader = ReplyReader(tools, call_id_prefix=call_id_prefix_of(run_id))
    events = reader.feed(text) + (reader.finish() if final else [])
    content, calls = read_events(events)
    order = []  # "message", or a call's index, as each began
    for event in events:
        if isinstance(event, Content) and "message" not in order:
            order.append("message")
        elif isinstance(event, Call):
            order.append(event.index)
    by_index = {call.index: call for call in calls}
    return [message_item(run_id, status, content) if kind == "message" else
            call_item(run_id, by_index[kind], status if i == len(order) - 1 else "completed")
            for i, kind in enumerate(order)]


def response_object(base: dict, *, status: str, output: list, usage: dict | None = None, error: dict | None = None,
                    incomplete_reason: str | None = None) -> dict:
    b = base
    return {"id": b["id"], "object": "response", "created_at": b["created_at"], "status": status,
            "background": b["background"], "error": error,
            "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
            "instructions": b["instructions"], "max_output_tokens": b["max_output_tokens"], "model": b["model"],
            "output": output, "parallel_tool_calls": b["parallel_tool_calls"],
            "previous_response_id": b["previous_response_id"], "reasoning": {"effort": None, "summary": None},
            "store": b["store"], "temperature": b["temperature"], "text": b["text"], "tool_choice": b["tool_choice"],
            "tools": b["tools"], "top_p": b["top_p"], "truncation": "disabled", "usage": usage, "user": None,
            "metadata": b["metadata"]}


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
    return response_object(base, status=status, output=output_items(base, run_id, item_status, text, logprobs),
                           usage=usage(prompt_tokens, output_tokens, int(terminal.usage.get("cached_tokens", 0))),
                           incomplete_reason=INCOMPLETE_REASON.get(terminal.finish_reason))


def sse_event(payload: dict) -> bytes:
    """One event: `event: <type>` and its JSON (compact, keys in the order made)."""
    return f"event: {payload['type']}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


SSE_KEEPALIVE = b": keep-alive\n\n"


def input_items(message) -> list[dict]:
    """The input items a chat message of a response's input stands for: a message item,
    an assistant's function calls (after its words, if any), or a function's output."""
    if message.role == "tool":
        return [{"type": "function_call_output", "id": f"fco_{message.pk}", "call_id": message.tool_call_id,
                 "output": message.content, "status": "completed"}]
    out = []
    if message.content or not message.tool_calls:
        kind = "output_text" if message.role == "assistant" else "input_text"
        part = {"type": kind, "text": message.content, **({"annotations": []} if kind == "output_text" else {})}
        out.append({"type": "message", "id": f"{ITEM_PREFIX}in{message.pk}", "role": message.role,
                    "content": [part], "status": "completed"})
    for j, call in enumerate(message.tool_calls or ()):
        out.append({"type": "function_call", "id": f"{CALL_ITEM_PREFIX}in{message.pk}_{j}", "call_id": call["id"],
                    "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                    "status": "completed"})
    return out
