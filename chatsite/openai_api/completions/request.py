"""The bodies of POST /v1/chat/completions and /v1/completions, checked and reduced
to what a run needs.

Sampling values themselves (ranges, NaN, the model's limits) are checked by
chatsite.runs.validation at admission, like every other run; this module checks
the OpenAI-specific shape and refuses, by name, the features this server does not
implement rather than silently ignoring them. `user` is accepted and not used (it
changes nothing in the reply). Unknown extra fields are ignored, as SDKs send some
(metadata, store)."""
from dataclasses import dataclass

from chatsite.errors import InvalidInput
from chatsite.openai_api.tools import definitions as tool_params
from chatsite.openai_api.vllm import params as vllm_params
from chatsite.request_digest import digest
from chatsite.runs.choices import MAX_CHOICES
from chatsite.runs.validation import clean_logprobs

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
CHAT_ROLES = {**ROLES, "tool": "tool"}  # chat completions also take a function's result

# Parameters that would change the reply's meaning: refused unless they ask for the default.
UNSUPPORTED = {"audio": (None,), "prediction": (None,), "modalities": (None, ["text"])}
# The legacy function calling, refused: tools and tool_choice replace it (tools.py).
LEGACY_TOOL_PARAMS = {"functions": (None, []), "function_call": (None, "none", "auto")}
# Passed to the run's sampling as they are; chatsite.runs.validation checks them.
SAMPLING_PARAMS = ("temperature", "top_p", "stop", "seed", "ignore_eos", "top_k", "min_p", "frequency_penalty",
                   "presence_penalty", "repetition_penalty", "response_format", "logit_bias")
TEXT_UNSUPPORTED = {"suffix": (None, ""), "best_of": (None, 1)}
MAX_TEXT_LOGPROBS = 5  # OpenAI's limit for /v1/completions' legacy `logprobs`
MAX_PROMPTS = 32  # prompts in one /v1/completions request
MAX_TEXT_CHOICES = 64  # prompts times n


@dataclass(frozen=True)
class CompletionRequest:
    model: str
    history: list[dict]  # earlier messages, {role, content}, oldest first
    content: str  # the last message: the user's
    stream: bool
    include_usage: bool
    sampling: dict  # clean_sampling's keyword arguments (None = the model's default)
    tools: str | None = None  # the first tool parameter sent, if any: the pool's template must take tools
    tool_use: tool_params.ToolUse | None = None  # the functions offered and how they must be used
    tool_call_id: str = ""  # set when the last message is a tool's result (role tool), not the user's
    digest: str = ""  # sha256 of the body: an Idempotency-Key repeat must send the same
    raw_prompt: bool = False  # a text completion: `content` goes to the model without the chat template
    n: int = 1  # choices: one run each
    role: str = "user"  # the last message's: a reply the model carries on (assistant), or a system message alone
    # A text completion's prompts after the first, each (text, token ids or None): one run per choice of each.
    more_prompts: tuple = ()
    prompt_token_ids: list | None = None  # the first prompt's token ids, when it was sent as token ids


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
    out, call_ids = [], set()
    for i, msg in enumerate(value):
        if not isinstance(msg, dict):
            raise InvalidInput(f"messages[{i}] must be an object with role and content", field=f"messages[{i}]")
        role = msg.get("role")
        if not isinstance(role, str) or role not in CHAT_ROLES:
            raise InvalidInput(f"messages[{i}].role must be one of system, developer, user, assistant, tool",
                               field=f"messages[{i}].role")
        if msg.get("function_call"):
            raise InvalidInput(f"messages[{i}].function_call (legacy function calling) is not supported; send "
                               "tool_calls", field=f"messages[{i}].function_call")
        item = {"role": CHAT_ROLES[role]}
        if role == "tool":
            item["tool_call_id"] = tool_params.tool_call_id(msg, i, call_ids)
        if msg.get("tool_calls") is not None:
            if role != "assistant":
                raise InvalidInput(f"messages[{i}].tool_calls: only an assistant message has tool calls",
                                   field=f"messages[{i}].tool_calls")
            item["tool_calls"] = tool_params.assistant_calls(msg["tool_calls"], i)
            call_ids.update(call["id"] for call in item["tool_calls"])
        content = msg.get("content")
        out.append({**item, "content": "" if content is None and "tool_calls" in item else _text(content, i)})
    if out[-1].get("tool_calls"):
        raise InvalidInput("the last message has tool calls: send their results (role 'tool') for the model to "
                           "answer", field=f"messages[{len(out) - 1}].tool_calls")
    return out


def _first_tool_param(body: dict, messages: list[dict]) -> str | None:
    """The first parameter that needs a chat template with tools: `tools` or
    `tool_choice` asking for them, else the first message with tool calls or a tool's result."""
    for name in ("tools", "tool_choice"):
        if body.get(name) not in (None, [], "none", "auto"):
            return name
    return next((f"messages[{i}]" for i, m in enumerate(messages) if m["role"] == "tool" or "tool_calls" in m),
                None)


def flag(body: dict, name: str, default: bool | None = False) -> bool | None:
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
    for name, allowed in LEGACY_TOOL_PARAMS.items():
        if body.get(name) not in allowed:
            raise InvalidInput(f"{name} (legacy function calling) is not supported; send tools and tool_choice",
                               field=name)
    tool_use = tool_params.parse_tool_use(body)
    tools = _first_tool_param(body, messages)
    vllm_params.refuse_unsupported(body, chat=True)
    sampling = {"max_tokens": _max_tokens(body), **{name: body.get(name) for name in SAMPLING_PARAMS},
                **_chat_logprobs(body), **vllm_params.vllm_sampling(body), **_template_options(body, messages),
                **_continuous_usage(body)}
    n = choices(body)
    if n > 1 and tool_use is not None:
        raise InvalidInput("n > 1 is not supported with tools: ask for one choice, or leave tools out", field="n")
    asked = {"model": model, "messages": messages, "stream": stream, "include_usage": include_usage,
             "sampling": sampling, "tools": tools, **_n_asked(n)}
    if tool_use is not None:  # absent otherwise: a request without tools keeps the digest it always had
        asked["tool_use"] = tool_use.as_run_tools()
    last = messages[-1]
    return CompletionRequest(model=model, history=messages[:-1], content=last["content"], stream=stream,
                             include_usage=include_usage, sampling=sampling, tools=tools, tool_use=tool_use,
                             tool_call_id=last.get("tool_call_id", ""), digest=digest(asked), n=n, role=last["role"])


def _template_options(body: dict, messages: list[dict]) -> dict:
    """How the chat template ends the prompt (vLLM's add_generation_prompt and
    continue_final_message; echo): a conversation that ends with a reply is a prefill
    the model carries on, unless the request asks for a new turn after it. {} for the
    defaults, so a request without them digests as it always did."""
    add, carry_on = flag(body, "add_generation_prompt", None), flag(body, "continue_final_message", None)
    last = messages[-1]["role"]
    if carry_on and add:
        raise InvalidInput("continue_final_message and add_generation_prompt cannot both be true: the model "
                           "either carries on the last message or starts a new one", field="continue_final_message")
    if carry_on and last != "assistant":
        raise InvalidInput("continue_final_message needs the last message to be the assistant's: it is the reply "
                           "the model carries on", field="continue_final_message")
    out = {}
    if last == "assistant" and (add or carry_on is False):
        out["add_generation_prompt"] = True  # a new reply after the last one, as OpenAI answers
    elif last != "assistant" and add is False:
        out["add_generation_prompt"] = False
    if flag(body, "echo"):
        out["echo"] = True
    return out


def _continuous_usage(body: dict) -> dict:
    """vLLM's stream_options.continuous_usage_stats: usage so far on every chunk."""
    value = (body.get("stream_options") or {}).get("continuous_usage_stats")
    if value is not None and not isinstance(value, bool):
        raise InvalidInput("stream_options.continuous_usage_stats must be true or false",
                           field="stream_options.continuous_usage_stats")
    return {"continuous_usage_stats": True} if value else {}


def _chat_logprobs(body: dict) -> dict:
    """{"logprobs": k} for `logprobs: true` with `top_logprobs` k (0 when left out), or
    {} (so a request without them digests as it always did). `top_logprobs` without
    `logprobs: true` is refused, as OpenAI refuses it."""
    wanted = flag(body, "logprobs")
    top = clean_logprobs(body.get("top_logprobs"), field="top_logprobs")
    if top is not None and not wanted:
        raise InvalidInput("top_logprobs needs \"logprobs\": true", field="top_logprobs")
    return {"logprobs": top or 0} if wanted else {}


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
    """A text completion request (POST /v1/completions): `prompt`, a string, token ids,
    or a list of either (one group of n choices each), goes to the model as it is.
    Raises InvalidInput naming the parameter."""
    model, stream, include_usage = _common(body)
    prompts = _prompts(body.get("prompt"))
    for name, allowed in TEXT_UNSUPPORTED.items():
        if body.get(name) not in allowed:
            raise InvalidInput(f"{name} is not supported by this server; leave it out", field=name)
    vllm_params.refuse_unsupported(body, chat=False)
    sampling = {"max_tokens": body.get("max_tokens"), **{name: body.get(name) for name in SAMPLING_PARAMS},
                **vllm_params.vllm_sampling(body), **_continuous_usage(body)}
    logprobs = clean_logprobs(body.get("logprobs"), field="logprobs", most=MAX_TEXT_LOGPROBS)
    if logprobs is not None:  # left out of the digest when not asked for, as before
        sampling["logprobs"] = logprobs
    if flag(body, "echo"):  # the prompt before each choice's text, with its logprobs when they are asked for
        sampling["echo"] = True
        if logprobs is not None and sampling.get("prompt_logprobs") is None:
            sampling["prompt_logprobs"] = logprobs
    n = choices(body)
    if len(prompts) * n > MAX_TEXT_CHOICES:
        raise InvalidInput(f"{len(prompts)} prompts with n={n} are {len(prompts) * n} choices; at most "
                           f"{MAX_TEXT_CHOICES} per request", field="n")
    asked = {"model": model, "prompt": prompts[0][0] if len(prompts) == 1 and prompts[0][1] is None else prompts,
             "stream": stream, "include_usage": include_usage, "sampling": sampling, "raw_prompt": True,
             **_n_asked(n)}
    (text, ids), *more = prompts
    return CompletionRequest(model=model, history=[], content=text or "", stream=stream, include_usage=include_usage,
                             sampling=sampling, digest=digest(asked), raw_prompt=True, n=n, more_prompts=tuple(more),
                             prompt_token_ids=ids)


def _prompts(prompt) -> list[tuple[str | None, list[int] | None]]:
    """`prompt` as a list of (text, None) or (None, token ids): a string, a list of
    token ids, or a list of strings or of token-id lists (one prompt each)."""
    if isinstance(prompt, str):
        return [(prompt, None)]
    if isinstance(prompt, list) and prompt and all(_is_token(t) for t in prompt):
        return [(None, prompt)]
    if (isinstance(prompt, list) and 0 < len(prompt) <= MAX_PROMPTS
            and all(isinstance(p, str) or (isinstance(p, list) and p and all(_is_token(t) for t in p))
                    for p in prompt)):
        return [(p, None) if isinstance(p, str) else (None, p) for p in prompt]
    raise InvalidInput(f"prompt must be a string, a list of token ids, or a list of 1 to {MAX_PROMPTS} of either",
                       field="prompt")


def _is_token(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
