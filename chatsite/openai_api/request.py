"""The bodies of POST /v1/chat/completions and /v1/completions, checked and reduced
to what a run needs.

Sampling values themselves (ranges, NaN, the model's limits) are checked by
chatsite.runs.validation at admission, like every other run; this module checks
the OpenAI-specific shape and refuses, by name, the features this server does not
implement rather than silently ignoring them. `user` is accepted and not used (it
changes nothing in the reply). Unknown extra fields are ignored, as SDKs send some
(metadata, store)."""
import hashlib
import json
from dataclasses import dataclass

from chatsite.errors import InvalidInput
from chatsite.runs.choices import MAX_CHOICES

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}

# Parameters that would change the reply's meaning: refused unless they ask for the default.
UNSUPPORTED = {
    "logprobs": (None, False), "top_logprobs": (None, 0), "logit_bias": (None, {}),
    "audio": (None,), "prediction": (None,), "modalities": (None, ["text"]),
}
# Tool calling, refused at submission with the pool's chat template named (services.py).
TOOL_PARAMS = {"tools": (None, []), "tool_choice": (None, "none", "auto"), "functions": (None, []),
               "function_call": (None, "none", "auto")}
# Passed to the run's sampling as they are; chatsite.runs.validation checks them.
SAMPLING_PARAMS = ("temperature", "top_p", "stop", "seed", "ignore_eos", "top_k", "min_p", "frequency_penalty",
                   "presence_penalty", "repetition_penalty", "response_format")
# /v1/completions: no response_format (OpenAI's text completions have none).
TEXT_SAMPLING_PARAMS = SAMPLING_PARAMS[:-1]
TEXT_UNSUPPORTED = {"echo": (None, False), "suffix": (None, ""), "logprobs": (None,), "best_of": (None, 1),
                    "logit_bias": (None, {})}


@dataclass(frozen=True)
class CompletionRequest:
    model: str
    history: list[dict]  # earlier messages, {role, content}, oldest first
    content: str  # the last message: the user's
    stream: bool
    include_usage: bool
    sampling: dict  # clean_sampling's keyword arguments (None = the model's default)
    tools: str | None = None  # the tool parameter sent, if any: refused with the pool's template named
    digest: str = ""  # sha256 of the body: an Idempotency-Key repeat must send the same
    raw_prompt: bool = False  # a text completion: `content` goes to the model without the chat template
    n: int = 1  # choices: one run each


def _text(content, i: int) -> str:
    """A message's text: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise InvalidInput(f"messages[{i}].content: only text parts ({{\"type\": \"text\", \"text\": "
                                   "...}) are supported", field=f"messages[{i}].content")
            parts.append(part["text"])
        return "".join(parts)
    raise InvalidInput(f"messages[{i}].content must be a string or a list of text parts",
                       field=f"messages[{i}].content")


def _messages(value) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise InvalidInput("messages must be a non-empty list of {role, content} objects", field="messages")
    out = []
    for i, msg in enumerate(value):
        if not isinstance(msg, dict):
            raise InvalidInput(f"messages[{i}] must be an object with role and content", field=f"messages[{i}]")
        role = msg.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise InvalidInput(f"messages[{i}].role must be one of system, developer, user, assistant "
                               "(tool messages are not supported)", field=f"messages[{i}].role")
        if msg.get("tool_calls") or msg.get("function_call"):
            raise InvalidInput(f"messages[{i}]: tool calls are not supported", field=f"messages[{i}]")
        out.append({"role": ROLES[role], "content": _text(msg.get("content"), i)})
    if out[-1]["role"] != "user":
        raise InvalidInput("the last message must be the user's (role 'user'): it is the one the model answers",
                           field=f"messages[{len(out) - 1}].role")
    return out


def flag(body: dict, name: str, default: bool = False) -> bool:
    """A true/false field of the body (absent: `default`); InvalidInput naming it otherwise."""
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be true or false", field=name)
    return value


def _max_tokens(body: dict):
    a, b = body.get("max_completion_tokens"), body.get("max_tokens")
    if a is not None and b is not None and a != b:
        raise InvalidInput("send max_completion_tokens or max_tokens, not two different values",
                           field="max_completion_tokens")
    return a if a is not None else b


def parse_completion_request(body) -> CompletionRequest:
    """A chat completion request, or InvalidInput naming the parameter at fault."""
    model, stream, include_usage = _common(body)
    messages = _messages(body.get("messages"))
    for name, allowed in UNSUPPORTED.items():
        if body.get(name) not in allowed:
            raise InvalidInput(f"{name} is not supported by this server; leave it out", field=name)
    tools = next((name for name, allowed in TOOL_PARAMS.items() if body.get(name) not in allowed), None)
    sampling = {"max_tokens": _max_tokens(body), **{name: body.get(name) for name in SAMPLING_PARAMS}}
    n = choices(body)
    asked = {"model": model, "messages": messages, "stream": stream, "include_usage": include_usage,
             "sampling": sampling, "tools": tools, **_n_asked(n)}
    return CompletionRequest(model=model, history=messages[:-1], content=messages[-1]["content"], stream=stream,
                             include_usage=include_usage, sampling=sampling, tools=tools, digest=digest(asked), n=n)


def _common(body) -> tuple[str, bool, bool]:
    """What both completion endpoints take alike: (model, stream, include_usage),
    after checking user. Raises InvalidInput."""
    if not isinstance(body, dict):
        raise InvalidInput("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidInput("model is required: a model id from GET /v1/models", field="model")
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise InvalidInput("user must be a string", field="user")
    stream = flag(body, "stream")
    options = body.get("stream_options")
    if options is not None and (not stream or not isinstance(options, dict)):
        raise InvalidInput("stream_options is only allowed with \"stream\": true, as an object", field="stream_options")
    return model, stream, flag(options or {}, "include_usage")


def parse_text_completion_request(body) -> CompletionRequest:
    """A text completion request (POST /v1/completions): `prompt`, a string or a list
    of one string, goes to the model as it is. Raises InvalidInput naming the parameter."""
    model, stream, include_usage = _common(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise InvalidInput("prompt must be a string (or a list of one string); token-id prompts and several "
                           "prompts per request are not supported", field="prompt")
    for name, allowed in TEXT_UNSUPPORTED.items():
        if body.get(name) not in allowed:
            raise InvalidInput(f"{name} is not supported by this server; leave it out", field=name)
    sampling = {"max_tokens": body.get("max_tokens"), **{name: body.get(name) for name in TEXT_SAMPLING_PARAMS}}
    n = choices(body)
    asked = {"model": model, "prompt": prompt, "stream": stream, "include_usage": include_usage,
             "sampling": sampling, "raw_prompt": True, **_n_asked(n)}
    return CompletionRequest(model=model, history=[], content=prompt, stream=stream, include_usage=include_usage,
                             sampling=sampling, digest=digest(asked), raw_prompt=True, n=n)


def choices(body: dict) -> int:
    """n: how many choices to generate, 1..MAX_CHOICES (absent: 1). Raises InvalidInput."""
    n = body.get("n")
    if n is None:
        return 1
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
        raise InvalidInput(f"n must be an integer from 1 to {MAX_CHOICES}: the number of choices to generate",
                           field="n")
    return n


def _n_asked(n: int) -> dict:
    # n=1 is left out of the digest, so a request's digest is what it was before n existed.
    return {} if n == 1 else {"n": n}


def digest(asked: dict) -> str:
    """sha256 of what a request asks for, as parsed: the same for the same request
    whatever its key order, spacing, or defaults sent or left out (stream: false)."""
    canonical = json.dumps(asked, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
