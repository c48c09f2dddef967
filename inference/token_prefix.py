"""A conversation's next prompt from the token ids its engine already saw or produced.

A reply's record (`record`) is the whole sequence its engine held at the end: the prompt
it was sent and the ids it generated (its end-of-turn token left out), with a digest of
the text those ids spell, salted by the tokenizer and chat template. A later turn, a
regenerate, an edit or a continue after that reply (`extend`) renders its messages as
always, finds the text the record spells at their start (the reply's own prompt, then
its text), and sends the record's ids followed by the ids of the rest of the text only:
the history is never tokenized again, and the engine's prefix cache sees the very ids
it computed. The ids differ from a fresh rendering's only where a tokenizer would have
split the text otherwise (at the join of the record and the rest, and inside generated
text a tokenizer would have merged differently: tests/inference/test_token_prefix.py).

No Django, no engine: the tokenizer is a Hugging Face one (or the fake engine's).
"""
import hashlib
from dataclasses import dataclass

from inference.prompt import PromptPlan, ordered_messages, template_kwargs


@dataclass(frozen=True)
class TokenRecord:
    """The ids an engine held at a reply's end, and the digest of the text they spell."""

    token_ids: list[int]
    digest: str
    dropped: int = 0  # the oldest turns its prompt left out (past the model's room): a later turn leaves them out too


def salt(tokenizer, chat_template: str | None) -> str:
    """What a record's ids depend on besides the text: the tokenizer and the template."""
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    template = chat_template if chat_template is not None else getattr(tokenizer, "chat_template", "") or ""
    return hashlib.sha256(f"{name}\0{template}".encode()).hexdigest()[:16]


def digest(text: str, *, salt: str) -> str:
    """The digest of `text` as spelled by ids of the tokenizer and template `salt` names."""
    return hashlib.sha256(f"{salt}\0{text}".encode()).hexdigest()[:32]


def record(tokenizer, *, prompt_ids: list[int], prompt_text: str, output_ids: list[int],
           salt: str, dropped: int = 0) -> TokenRecord:
    """The record of a reply: the prompt's ids (which spell `prompt_text`, without its
    oldest `dropped` turns) and the ids the engine generated, but for a last special token
    (the end of turn: the next turn's rendering writes it again, as the same id), with the
    digest of the text they spell."""
    special = set(getattr(tokenizer, "all_special_ids", ()) or ())
    output = list(output_ids)
    if output and output[-1] in special:
        output.pop()
    text = prompt_text + (_decode(tokenizer, output) if output else "")
    return TokenRecord(list(prompt_ids) + output, digest(text, salt=salt), dropped)


def _decode(tokenizer, ids: list[int]) -> str:
    try:  # a Hugging Face tokenizer: the text exactly as the ids spell it
        return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    except TypeError:  # the fake engine's takes the ids only
        return tokenizer.decode(ids)


def _known_text(tokenizer, messages: list[dict], continuation: str, kwargs: dict) -> str | None:
    """The text a record of the reply these messages build on spells: for a reply carried
    on, the prompt up to the reply and the reply so far (the continuation); else the
    prompt up to the last assistant message, then that message's text. None when the
    messages hold no reply."""
    if continuation:
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                             **kwargs) + continuation
    last = next((i for i in range(len(messages) - 1, 0, -1) if messages[i]["role"] == "assistant"), None)
    if last is None or not messages[last].get("content"):
        return None
    return tokenizer.apply_chat_template(messages[:last], add_generation_prompt=True, tokenize=False,
                                         **kwargs) + messages[last]["content"]


def extend(tokenizer, messages: list[dict], known: TokenRecord, *, max_prompt_tokens: int, salt: str,
           continuation: str = "", carried: str = "", chat_template: str | None = None,
           tools: list[dict] | None = None, add_generation_prompt: bool = True) -> PromptPlan | None:
    """The prompt `inference.prompt.assemble` would build with these arguments, as the
    ids of `known` (a reply's record) followed by the ids of the text after what they
    spell, without the oldest turns `known`'s prompt left out; None when they do not spell
    the start of this prompt (another history, model or template, a reply whose text the
    engine's ids do not spell) or the prompt would not fit (assemble then drops more)."""
    ordered = ordered_messages(messages)
    if known.dropped:  # past the room: the turns the record's prompt left out stay out
        system = 1 if ordered and ordered[0]["role"] == "system" else 0
        if known.dropped >= len(ordered) - system:
            return None
        ordered = ordered[:system] + ordered[system + known.dropped:]
    kwargs = template_kwargs(chat_template, tools)
    head = _known_text(tokenizer, ordered, continuation, kwargs)
    if head is None or digest(head, salt=salt) != known.digest:
        return None
    text = tokenizer.apply_chat_template(ordered, add_generation_prompt=add_generation_prompt, tokenize=False,
                                         **kwargs) + continuation
    if not text.startswith(head):
        return None
    rest = text[len(head):]
    ids = known.token_ids + (tokenizer.encode(rest, add_special_tokens=False) if rest else [])
    carried_ids = tokenizer.encode(carried, add_special_tokens=False) if carried else []
    ids += carried_ids
    if len(ids) > max_prompt_tokens:
        return None
    return PromptPlan(ids, len(ordered), known.dropped, len(carried_ids), text=text + carried,
                      from_ids=len(known.token_ids))
