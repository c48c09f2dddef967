"""Prompt assembly: the model's chat template over the newest turns that fit."""
import json
from dataclasses import dataclass


# Past its room a conversation drops its oldest turns down to this share of the room, not
# just enough to fit: its next turns start as this one did (the engine's prefix cache and
# the reply's kept ids serve them, inference.token_prefix) until they fill the room again.
# Dropping one more turn each turn would start every prompt cold and tokenize the whole
# history several times a turn (bench.probes.past_context).
REFILL = 0.8


class PromptTooLong(ValueError):
    """Even the newest message alone does not fit the context left for the prompt."""


@dataclass(frozen=True)
class PromptPlan:
    token_ids: list[int]
    num_messages_kept: int
    num_messages_dropped: int
    num_carried_tokens: int = 0  # the tokens of `carried` at its end (billed as completion, not prompt)
    text: str = ""  # the text the ids spell (a reply's record digests it: inference.token_prefix)
    from_ids: int = 0  # the leading ids taken from a reply's record rather than tokenized (0: none)


def _tail(tokenizer, continuation: str, carried: str) -> tuple[list[int], int]:
    """The token ids after the prompt proper: `continuation` then `carried`, encoded as
    one text (as the engine reads them), and how many of them are `carried`'s."""
    if not continuation and not carried:
        return [], 0
    tail = tokenizer.encode(continuation + carried, add_special_tokens=False)
    if not carried:
        return tail, 0
    if not continuation:
        return tail, len(tail)
    return tail, max(0, len(tail) - len(tokenizer.encode(continuation, add_special_tokens=False)))


def template_message(message: dict) -> dict:
    """A message as chat templates read it: an assistant's tool calls with their
    arguments as an object (OpenAI sends them as JSON text; templates write them
    with `tojson`, as vLLM's server hands them over)."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    out = []
    for call in calls:
        function = dict(call.get("function") or {})
        if isinstance(function.get("arguments"), str):
            try:
                function["arguments"] = json.loads(function["arguments"])
            except ValueError:
                pass  # the web tier checked it is JSON; a template still gets the text
        out.append({**call, "function": function})
    return {**message, "tool_calls": out}


def ordered_messages(messages: list[dict]) -> list[dict]:
    """The messages as a prompt renders them: the first system message, then the turns."""
    system = [m for m in messages if m["role"] == "system"][:1]
    return system + [template_message(m) for m in messages if m["role"] != "system"]


def template_kwargs(chat_template: str | None, tools: list[dict] | None) -> dict:
    kwargs = {}
    if chat_template is not None:
        kwargs["chat_template"] = chat_template
    if tools:
        kwargs["tools"] = tools
    return kwargs


def assemble(tokenizer, messages: list[dict], *, max_prompt_tokens: int, continuation: str = "",
             carried: str = "", chat_template: str | None = None, tools: list[dict] | None = None,
             add_generation_prompt: bool = True, refill: float = REFILL) -> PromptPlan:
    """Token ids for `messages` (dicts with role and content; an assistant's may have
    tool_calls, a tool's tool_call_id) rendered by `chat_template` (default: the
    tokenizer's own) with `tools` (function definitions, for a template that reads
    them) and, unless `add_generation_prompt` is false, the generation prompt, plus
    `continuation` (a reply this run carries on: a prefill, or a reply continued) and
    `carried` (text earlier attempts of this run already generated). Keeps the first
    system message; a prompt that does not fit whole drops its oldest turns, the fewest
    that bring it within `refill` of `max_prompt_tokens` (REFILL), or all but the last when
    that alone is more. A system message alone is a prompt too.

    Raises PromptTooLong when the last message alone does not fit."""
    ordered = ordered_messages(messages)
    system = ordered[:1] if ordered and ordered[0]["role"] == "system" else []
    turns = ordered[len(system):]
    if not turns and not system:
        raise ValueError("a prompt needs at least one message")
    tail, carried_tokens = _tail(tokenizer, continuation, carried)
    kwargs = template_kwargs(chat_template, tools)

    rendered: dict[int, list[int]] = {}
    texts: dict[int, str] = {}

    def render(start: int) -> list[int]:
        if start not in rendered:
            kept = system + turns[start:]
            text = tokenizer.apply_chat_template(kept, add_generation_prompt=add_generation_prompt, tokenize=False,
                                                 **kwargs)
            rendered[start] = tokenizer.encode(text, add_special_tokens=False) + tail
            texts[start] = text + continuation + carried
        return rendered[start]

    # Usually everything fits: one render. Otherwise, since dropping more turns never
    # lengthens the prompt, binary-search the fewest drops that refill it.
    if len(render(0)) <= max_prompt_tokens:
        return PromptPlan(render(0), len(system) + len(turns), 0, carried_tokens, text=texts[0])
    lo, hi = 0, max(0, len(turns) - 1)
    if len(render(hi)) > max_prompt_tokens:
        raise PromptTooLong(f"the message needs more than the {max_prompt_tokens} prompt tokens the model has room for")
    target = int(max_prompt_tokens * refill)
    while lo < hi:
        mid = (lo + hi) // 2
        if len(render(mid)) <= target:
            hi = mid
        else:
            lo = mid + 1
    ids = render(lo)
    return PromptPlan(ids, len(system) + len(turns) - lo, lo, carried_tokens, text=texts[lo])


def encode_raw(tokenizer, text: str, *, max_prompt_tokens: int, carried: str = "",
               token_ids: list[int] | None = None) -> PromptPlan:
    """Token ids for `text` as it is, with no chat template (a text completion's
    prompt, with the tokenizer's own special tokens, as vLLM's completions endpoint
    encodes it), or `token_ids` as they are (a prompt sent as token ids), plus
    `carried` (what earlier attempts generated). Raises PromptTooLong when it does not fit."""
    tail, carried_tokens = _tail(tokenizer, "", carried)
    ids = (list(token_ids) if token_ids is not None else tokenizer.encode(text, add_special_tokens=True)) + tail
    if len(ids) > max_prompt_tokens:
        raise PromptTooLong(f"the prompt is {len(ids)} tokens, more than the {max_prompt_tokens} prompt tokens the "
                            "model has room for")
    return PromptPlan(ids, 1, 0, carried_tokens)
