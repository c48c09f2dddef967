"""The body of POST /v1/responses, checked and reduced to what a run needs.

As for chat completions (chatsite.openai_api.request), sampling values are checked
at admission like every other run's; this module checks the Responses shape and
refuses, by name, whatever would change the reply that this server does not do
(tools, reasoning, structured output, images and files, `store: false`). Fields
that change nothing in the reply (user, safety_identifier, prompt_cache_key,
service_tier, parallel_tool_calls) are accepted and not used. As on chat
completions, vLLM's extra parameter `ignore_eos` is honoured."""
from dataclasses import dataclass

from chatsite.errors import InvalidInput
from chatsite.openai_api.request import ROLES, flag
from chatsite.runs.schema_limits import check_json
from chatsite.runs.validation import clean_logprobs

# Parameters that would change the reply: refused unless they ask for the default.
UNSUPPORTED = {
    "tools": (None, []), "tool_choice": (None, "none", "auto"), "reasoning": (None,),
    "truncation": (None, "disabled"), "prompt": (None,), "conversation": (None,),
    "max_tool_calls": (None,), "context_management": (None,),
}
TEXT_PARTS = ("input_text", "output_text")  # output_text: a reply passed back as input
LOGPROBS_INCLUDE = "message.output_text.logprobs"  # the one `include` value served
MAX_METADATA_PAIRS, MAX_METADATA_KEY, MAX_METADATA_VALUE = 16, 64, 512


@dataclass(frozen=True)
class ResponseRequest:
    model: str
    history: list[dict]  # input items before the last, {role, content}, oldest first
    content: str  # the last input item: the user's
    instructions: str | None
    previous_response_id: str | None
    stream: bool
    background: bool
    metadata: dict
    sampling: dict  # max_tokens, temperature, top_p, vLLM's ignore_eos (None = the model's default), logprobs


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


def _items(value) -> list[dict]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise InvalidInput("input is required: a string, or a non-empty list of message items", field="input")
    out = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise InvalidInput(f"{where} must be a message item {{role, content}}", field=where)
        if item.get("type", "message") != "message":
            raise InvalidInput(f"{where}.type: only message items are supported, not {str(item['type'])[:40]!r}",
                               field=f"{where}.type")
        role = item.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise InvalidInput(f"{where}.role must be one of user, assistant, system, developer",
                               field=f"{where}.role")
        out.append({"role": ROLES[role], "content": _text(item.get("content"), where)})
    if out[-1]["role"] != "user":
        raise InvalidInput("the last input item must be the user's (role 'user'): it is the one the model answers",
                           field=f"input[{len(out) - 1}].role")
    return out


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
    text = body.get("text")
    if text is not None:
        if not isinstance(text, dict) or text.get("format") not in (None, {"type": "text"}):
            raise InvalidInput("text.format: only {\"type\": \"text\"} is supported", field="text.format")
        if text.get("verbosity") not in (None, "medium"):
            raise InvalidInput("text.verbosity is not supported by this server; leave it out", field="text.verbosity")
    if body.get("store") is False:
        raise InvalidInput("store: false is not supported: every response is stored (it is a run you can "
                           "retrieve, resume and delete); leave store out, and DELETE /v1/responses/{id} when done",
                           field="store")


def parse_response_request(body) -> ResponseRequest:
    """The request, or InvalidInput naming the parameter at fault."""
    if not isinstance(body, dict):
        raise InvalidInput("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidInput("model is required: a model id from GET /v1/models", field="model")
    items = _items(body.get("input"))
    _refusals(body)
    stream = flag(body, "stream")
    if body.get("stream_options") is not None and not stream:
        raise InvalidInput("stream_options is only allowed with \"stream\": true", field="stream_options")
    sampling = {"max_tokens": body.get("max_output_tokens"), "temperature": body.get("temperature"),
                "top_p": body.get("top_p"), "ignore_eos": body.get("ignore_eos"), **_logprobs(body)}
    return ResponseRequest(model=model, history=items[:-1], content=items[-1]["content"],
                           instructions=_optional_str(body, "instructions"),
                           previous_response_id=_optional_str(body, "previous_response_id"),
                           stream=stream, background=flag(body, "background"),
                           metadata=_metadata(body.get("metadata")), sampling=sampling)
