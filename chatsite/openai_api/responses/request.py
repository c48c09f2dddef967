"""The body of POST /v1/responses, checked and reduced to what a run needs.

As for chat completions (chatsite.openai_api.completions.request), sampling values are checked
at admission like every other run's; this module checks the Responses shape and
refuses, by name, whatever would change the reply that this server does not do
(reasoning, hosted tools, images and files). Function tools, `text.format` and
`store: false` are served. Fields that change nothing in the reply (user,
safety_identifier, prompt_cache_key, service_tier) are accepted and not used. As on
chat completions, vLLM's extra parameter `ignore_eos` is honoured."""
from dataclasses import dataclass, field

from chatsite.errors import InvalidInput
from chatsite.openai_api.completions.request import ROLES, flag
from chatsite.openai_api.responses import tools as responses_tools
from chatsite.openai_api.tools.definitions import ToolUse
from chatsite.runs.schema_limits import check_json
from chatsite.runs.validation import clean_logprobs, clean_response_format

# Parameters that would change the reply: refused unless they ask for the default.
UNSUPPORTED = {
    "reasoning": (None,), "truncation": (None, "disabled"), "prompt": (None,), "conversation": (None,),
    "max_tool_calls": (None,), "context_management": (None,),
}
TEXT_PARTS = ("input_text", "output_text")  # output_text: a reply passed back as input
LOGPROBS_INCLUDE = "message.output_text.logprobs"  # the one `include` value served
MAX_METADATA_PAIRS, MAX_METADATA_KEY, MAX_METADATA_VALUE = 16, 64, 512


@dataclass(frozen=True)
class ResponseRequest:
    model: str
    history: list[dict]  # input items before the last as chat messages, oldest first
    content: str  # the last input item's text: the one the model answers
    instructions: str | None
    previous_response_id: str | None
    stream: bool
    background: bool
    metadata: dict
    sampling: dict  # max_tokens, temperature, top_p, vLLM's ignore_eos (None = the model's default), logprobs,
    # response_format
    role: str = "user"  # the last item's: user, tool (a function's output), assistant (a prefill), system (alone)
    tool_call_id: str = ""  # the last item's call, when it is a function's output
    tool_use: ToolUse | None = None
    store: bool = True
    # What the response object echoes and the run does not hold: tools, tool_choice,
    # parallel_tool_calls, text.
    options: dict = field(default_factory=dict)
    # Calls the input's function outputs answer that no function_call item of the input made:
    # the previous response's, checked when it is read.
    outside_call_ids: frozenset = frozenset()


def _text(content, where: str) -> str:
    """An input message's text: a string, or a list of input_text (or output_text) parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidInput(f"{where}.content must be a string or a list of input_text parts",
                           field=f"{where}.content")
    parts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in TEXT_PARTS or not isinstance(part.get("text"), str):
            raise InvalidInput(f"{where}.content[{j}]: only text parts ({{\"type\": \"input_text\", \"text\": ...}}) "
                               f"are supported, not {str(kind)[:40]!r}", field=f"{where}.content[{j}].type")
        parts.append(part["text"])
    return "".join(parts)


def _items(value) -> tuple[list[dict], frozenset]:
    """The input as chat messages (a function's calls joined to the assistant message
    before them, its outputs as tool messages), and the call ids outputs answer that the
    input did not make."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}], frozenset()
    if not isinstance(value, list) or not value:
        raise InvalidInput("input is required: a string, or a non-empty list of items", field="input")
    out, made, outside = [], set(), set()
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise InvalidInput(f"{where} must be an item: a message {{role, content}}, a function_call or a "
                               "function_call_output", field=where)
        kind = item.get("type", "message")
        if kind == "function_call":
            call = responses_tools.call_item(item, where)
            made.add(call["id"])
            if out and out[-1]["role"] == "assistant" and not out[-1].get("tool_call_id"):
                out[-1].setdefault("tool_calls", []).append(call)  # the reply these calls belong to
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            message = responses_tools.output_item(item, where)
            if message["tool_call_id"] not in made:
                outside.add(message["tool_call_id"])
            out.append(message)
        elif kind == "message":
            role = item.get("role")
            if not isinstance(role, str) or role not in ROLES:
                raise InvalidInput(f"{where}.role must be one of user, assistant, system, developer",
                                   field=f"{where}.role")
            out.append({"role": ROLES[role], "content": _text(item.get("content"), where)})
        else:
            raise InvalidInput(f"{where}.type: only message, function_call and function_call_output items are "
                               f"supported, not {str(kind)[:40]!r}", field=f"{where}.type")
    if out[-1].get("tool_calls"):
        raise InvalidInput("the last input item is a function call: send its output (a function_call_output "
                           "item) for the model to answer", field=f"input[{len(value) - 1}]")
    return out, frozenset(outside)


def _metadata(value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > MAX_METADATA_PAIRS:
        raise InvalidInput(f"metadata must be an object of at most {MAX_METADATA_PAIRS} string pairs",
                           field="metadata")
    for k, v in value.items():
        if len(k) > MAX_METADATA_KEY or not isinstance(v, str) or len(v) > MAX_METADATA_VALUE:
            raise InvalidInput(f"metadata: keys are at most {MAX_METADATA_KEY} characters and values strings of at "
                               f"most {MAX_METADATA_VALUE}", field="metadata")
    check_json(value, field="metadata")  # stored as jsonb: text Postgres takes
    return value


def _optional_str(body: dict, name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string", field=name)
    return value


def _logprobs(body: dict) -> dict:
    """{"logprobs": k} when `include` asks for message.output_text.logprobs (k: top_logprobs,
    0 when left out), else {}. Any other include value, or top_logprobs above 0 without
    that include (it would return nothing), is refused by name."""
    include = body.get("include")
    if include is None:
        include = []
    if not isinstance(include, list) or any(v != LOGPROBS_INCLUDE for v in include):
        raise InvalidInput(f"include: only \"{LOGPROBS_INCLUDE}\" is supported by this server", field="include")
    top = clean_logprobs(body.get("top_logprobs"), field="top_logprobs")
    if not include:
        if top:
            raise InvalidInput(f"top_logprobs needs include: [\"{LOGPROBS_INCLUDE}\"] (without it no logprobs are "
                               "returned)", field="top_logprobs")
        return {}
    return {"logprobs": top or 0}


def _refusals(body: dict) -> None:
    for name, allowed in UNSUPPORTED.items():
        if body.get(name) not in allowed:
            raise InvalidInput(f"{name} is not supported by this server; leave it out", field=name)


def _text_format(body: dict) -> tuple[dict | None, dict]:
    """`text.format` as the run's response_format (None: text), and the `text` the
    response object echoes. json_schema's schema is checked as response_format's, said
    of text.format."""
    text = body.get("text")
    if text is None:
        return None, {"format": {"type": "text"}}
    if not isinstance(text, dict):
        raise InvalidInput("text must be an object: {\"format\": {...}}", field="text")
    if text.get("verbosity") not in (None, "medium"):
        raise InvalidInput("text.verbosity is not supported by this server; leave it out", field="text.verbosity")
    fmt = text.get("format") or {"type": "text"}
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None, {"format": {"type": "text"}}
    if kind == "json_object":
        return {"type": "json_object"}, {"format": {"type": "json_object"}}
    if kind != "json_schema":
        raise InvalidInput('text.format must be {"type": "text"}, {"type": "json_object"} or {"type": "json_schema", '
                           '"name": ..., "schema": {...}}', field="text.format")
    chat = {"type": "json_schema", "json_schema": {k: fmt[k] for k in ("name", "schema", "strict") if k in fmt}}
    try:
        clean_response_format(chat)
    except InvalidInput as exc:
        field = (exc.field or "").replace("response_format.json_schema", "text.format")
        raise InvalidInput(exc.message.replace("response_format.json_schema", "text.format"), field=field) from None
    echo = {"type": "json_schema", "name": fmt["name"], "schema": fmt["schema"], "strict": fmt.get("strict", True),
            "description": fmt.get("description")}
    return chat, {"format": echo}


def _store(body: dict) -> bool:
    store = flag(body, "store", True)
    if not store and flag(body, "background"):
        raise InvalidInput("background responses are stored (they are read back with GET): send store: true, or "
                           "leave background out", field="background")
    return store


def parse_response_request(body) -> ResponseRequest:
    """The request, or InvalidInput naming the parameter at fault."""
    if not isinstance(body, dict):
        raise InvalidInput("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidInput("model is required: a model id from GET /v1/models", field="model")
    items, outside = _items(body.get("input"))
    _refusals(body)
    tool_use, options = responses_tools.parse_tools(body)
    response_format, options["text"] = _text_format(body)
    stream = flag(body, "stream")
    if body.get("stream_options") is not None and not stream:
        raise InvalidInput("stream_options is only allowed with \"stream\": true", field="stream_options")
    previous = _optional_str(body, "previous_response_id")
    if outside and previous is None:
        raise InvalidInput(f"a function_call_output answers call {sorted(outside)[0][:60]!r}, which no function_call "
                           "item of the input made (nor a previous response: previous_response_id)", field="input")
    sampling = {"max_tokens": body.get("max_output_tokens"), "temperature": body.get("temperature"),
                "top_p": body.get("top_p"), "ignore_eos": body.get("ignore_eos"), **_logprobs(body)}
    if response_format is not None:
        sampling["response_format"] = response_format
    last = items[-1]
    return ResponseRequest(model=model, history=items[:-1], content=last["content"],
                           instructions=_optional_str(body, "instructions"), previous_response_id=previous,
                           stream=stream, background=flag(body, "background"),
                           metadata=_metadata(body.get("metadata")), sampling=sampling, role=last["role"],
                           tool_call_id=last.get("tool_call_id", ""), tool_use=tool_use, store=_store(body),
                           options=options, outside_call_ids=outside)
