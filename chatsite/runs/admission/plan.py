"""Before anything is written: the turn read and checked against what it asks for.

The chat (the caller's own) or the new one, the pool and its queue, the cleaned
sampling, the turn's text and the prompt tokens its snapshot may use. Every refusal
here is the client's to fix (InvalidInput, NotFound) and writes nothing."""
import json
from dataclasses import dataclass

from django.conf import settings

from chatsite.chats.models import Chat, Message
from chatsite.chats.services import chat_new, history_rows
from chatsite.errors import InvalidInput, NotFound
from chatsite.pools.selectors import allowed_pool_ids, pool_checked
from chatsite.pools.tokens import (TEMPLATE_TOKENS_PER_MESSAGE, TEMPLATE_TOKENS_PER_PROMPT, count_tokens,
                                   decode_tokens, pool_takes_tools)
from chatsite.runs.admission.ask import UNSET, Ask, Branch, InChat, Regenerate, Send
from chatsite.runs.choices import MAX_CHOICES
from chatsite.runs.models import GenerationRun
from chatsite.runs.queues import TIERS
from chatsite.runs.services.finalize import run_finalize_if_ended
from chatsite.runs.store import reads
from chatsite.runs.store.queue import QueueCounts
from chatsite.runs.validation import Sampling, clean_sampling
from chatsite.text import MAX_SYSTEM_PROMPT_CHARS, clean_text

# What a continued reply keeps of the first run's sampling. Not response_format: a
# grammar restarted after the reply's first part would start a second JSON value.
CONTINUED_SAMPLING = ("temperature", "top_p", "stop", "ignore_eos", "top_k", "min_p", "frequency_penalty",
                      "presence_penalty", "repetition_penalty")


@dataclass(frozen=True, slots=True)
class Plan:
    chat: Chat  # its pool set; not saved yet for a NewChat
    new: bool  # the chat is written by this turn
    history: list  # messages written before the turn (a NewChat's or a Branch's), as history_rows gives them
    pool: object
    queue: QueueCounts | None  # the pool's queue as read with the chat or the pool (None: read it when needed)
    sampling: Sampling
    content: str = ""  # Send: the message
    tokens: int = 0  # Send: its tokens
    edit_of: Message | None = None  # Send: the message this one is a new version of
    asked: Message | None = None  # Regenerate, Continue: the question answered
    continued: Message | None = None  # Continue: the reply carried on
    room: int = 0  # prompt tokens the snapshot may use
    extra_tokens: int = 0  # the prompt's tokens beyond its messages (tool definitions)


def plan(ask: Ask) -> Plan:
    """Read and check the turn; raises InvalidInput or NotFound naming the problem (the
    turn's own fields with the surface's `turn_field_prefix`)."""
    chat, new, queue = _chat(ask)
    try:
        return _turn(ask, chat, new, queue)
    except InvalidInput as exc:
        if ask.turn_field_prefix and exc.field:
            exc.field = ask.turn_field_prefix + exc.field
        raise


def _turn(ask: Ask, chat: Chat, new: bool, queue: QueueCounts | None) -> Plan:
    if ask.tier not in TIERS:
        raise InvalidInput(f"tier must be one of {', '.join(TIERS)}", field="tier")
    if isinstance(ask.choices, bool) or not isinstance(ask.choices, int) or not 1 <= ask.choices <= MAX_CHOICES:
        raise InvalidInput(f"n (the number of choices) must be an integer from 1 to {MAX_CHOICES}", field="n")
    pool = chat.pool
    if ask.model is not None and ask.model != pool.name:
        pool, queue = _pool(ask, ask.model)
    elif not new:  # the chat's own pool: still the tenant's to use, and enabled
        pool = pool_checked(pool.name, pool, _allowed(ask.caller))
    history = history_rows(pool, list(ask.where.history)) if not isinstance(ask.where, InChat) else []
    if ask.system_prompt is not UNSET:  # the chat's system prompt from this turn on
        chat.system_prompt = "" if ask.system_prompt is None else clean_text(
            ask.system_prompt, field="system_prompt", max_chars=MAX_SYSTEM_PROMPT_CHARS, allow_empty=True).strip()
    if ask.needs_tools and not pool_takes_tools(pool):  # tools reach the model only through its template
        raise InvalidInput(f"{ask.needs_tools}: the chat template of model {pool.name!r} has no tools, so it cannot "
                           "call functions; leave tools, tool_choice and tool messages out, or use a model whose "
                           "template has them", field=ask.needs_tools)
    extra = _tool_tokens(pool, ask.run_sampling)
    turn = ask.turn
    if isinstance(turn, Send):
        return _send(ask, chat, new, history, pool, queue, extra)
    message = _message(chat, new, turn.message_id)
    if isinstance(turn, Regenerate):
        if message.role != Message.Role.ASSISTANT or message.parent_id is None:
            raise InvalidInput("only a reply can be regenerated; edit your message to send it again", field="message")
        asked = Message.objects.get(pk=message.parent_id)
        sampling = _sampling(chat, pool, ask.sampling)
        room = _room(chat, pool, sampling, asked.token_count, what=f"the question is {asked.token_count} tokens")
        return Plan(chat, new, history, pool, queue, sampling, asked=asked, room=room, extra_tokens=extra)
    return _continue(ask, chat, new, history, queue, message, extra)


def _chat(ask: Ask) -> tuple[Chat, bool, QueueCounts | None]:
    where, caller = ask.where, ask.caller
    if isinstance(where, InChat):
        read = reads.chat_for_turn(tenant=caller.tenant, user_id=caller.user.pk, chat_id=where.chat_id)
        return read.chat, False, read.queue
    if isinstance(where, Branch):
        return where.chat, False, None
    pool, queue = _pool(ask, where.model)
    chat = chat_new(tenant=caller.tenant, owner=caller.user, pool=pool, title=where.title, listed=where.listed,
                    system_prompt=where.system_prompt, temperature=where.temperature, max_tokens=where.max_tokens)
    return chat, True, queue


def _pool(ask: Ask, name):
    """The pool `name` with its queue, if the caller's tenant may use it now."""
    if name is None or name == "":
        raise InvalidInput("model is required; GET /api/models/ lists the models you can use", field="model")
    read = reads.pool_for_turn(tenant_id=ask.caller.tenant.pk, name=name)
    return pool_checked(name, read.pool, _allowed(ask.caller)), read.queue


def _message(chat: Chat, new: bool, message_id) -> Message:
    try:
        if new:
            raise Message.DoesNotExist
        return Message.objects.get(chat=chat, pk=int(message_id))
    except (Message.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound("no such message in this chat") from None


def _send(ask, chat, new, history, pool, queue, extra) -> Plan:
    turn, sampling_asked = ask.turn, ask.sampling
    content = turn.content
    if turn.token_ids is not None:  # the message keeps the prompt's text as the pool's tokenizer reads it
        content = decode_tokens(pool.model, turn.token_ids) or f"[a prompt of {len(turn.token_ids)} token ids]"
        sampling_asked = {**sampling_asked, "prompt_token_ids": turn.token_ids}
    content = clean_text(content, field="content", max_chars=settings.CHATSITE["MAX_MESSAGE_CHARS"])
    edit_of = None
    if turn.edit_of is not None:
        edit_of = _message(chat, new, turn.edit_of)
        if edit_of.role != Message.Role.USER:
            raise InvalidInput("only a message you sent can be edited", field="message")
    sampling = _sampling(chat, pool, sampling_asked)
    tokens = count_tokens(pool.model, content)
    room = _room(chat, pool, sampling, tokens, what=f"the message is {tokens} tokens")
    return Plan(chat, new, history, pool, queue, sampling, content=content, tokens=tokens, edit_of=edit_of,
                room=room, extra_tokens=extra)


def _continue(ask, chat, new, history, queue, message, extra) -> Plan:
    first = GenerationRun.objects.filter(assistant_message=message).select_related("pool").first()
    if first is not None and first.status in GenerationRun.ACTIVE and run_finalize_if_ended(run_id=first.pk):
        # Its end reached the page before its worker saved it: saved here, as the door saves a busy chat's.
        first = GenerationRun.objects.select_related("pool").get(pk=first.pk)
        message.refresh_from_db()
    if first is None or first.finish_reason != "length":
        raise InvalidInput("only a reply that stopped at the length limit can be continued", field="message")
    if message.replaced_by_id is not None:
        raise InvalidInput("this reply was already continued", field="message")
    pool = pool_checked(first.pool.name, first.pool, _allowed(ask.caller))
    kept = first.sampling or {}
    max_tokens = ask.sampling.get("max_tokens")
    if max_tokens is None and chat.max_tokens is not None:  # the chat's reply length, as a new turn has
        max_tokens = min(chat.max_tokens, pool.max_output_tokens)
    sampling = clean_sampling(pool, max_tokens=max_tokens, **{name: kept.get(name) for name in CONTINUED_SAMPLING})
    asked = Message.objects.get(pk=message.parent_id)
    tokens = asked.token_count + message.token_count + TEMPLATE_TOKENS_PER_MESSAGE
    room = _room(chat, pool, sampling, tokens, what=f"the question and the reply so far are {tokens} tokens")
    return Plan(chat, new, history, pool, queue if pool.pk == chat.pool_id else None, sampling, asked=asked,
                continued=message, room=room, extra_tokens=extra)


def _allowed(caller) -> frozenset:
    """The pools the caller's tenant is limited to (empty: every enabled pool)."""
    return caller.limits.allowed_pool_ids if caller.limits is not None else allowed_pool_ids(caller.tenant)


def _sampling(chat: Chat, pool, asked: dict) -> Sampling:
    """The client's values, else the chat's settings, else the pool's defaults."""
    asked = dict(asked)
    if asked.get("max_tokens") is None and chat.max_tokens is not None:
        asked["max_tokens"] = min(chat.max_tokens, pool.max_output_tokens)
    if asked.get("temperature") is None:
        asked["temperature"] = chat.temperature
    return clean_sampling(pool, **asked)


def _room(chat: Chat, pool, sampling: Sampling, tokens: int, *, what: str) -> int:
    """The prompt tokens the snapshot may use; raises InvalidInput when the turn itself
    (with the chat's system prompt) does not fit."""
    room = pool.context_length - sampling.max_tokens - TEMPLATE_TOKENS_PER_PROMPT
    need = tokens + TEMPLATE_TOKENS_PER_MESSAGE
    if chat.system_prompt:
        need += count_tokens(pool.model, chat.system_prompt) + TEMPLATE_TOKENS_PER_MESSAGE
        what += " with the chat's system prompt"
    if need > room:
        raise InvalidInput(
            f"{what}, but model {pool.name!r} has room for {max(room, 0)} prompt tokens when replying with up to "
            f"{sampling.max_tokens} tokens; shorten it or ask for fewer max_tokens",
            field="content", code="context_length_exceeded")
    return room


def _tool_tokens(pool, run_sampling: dict) -> int:
    """The tool definitions' tokens: they go into the prompt too."""
    tools = run_sampling.get("tools")
    return count_tokens(pool.model, json.dumps(tools["definitions"])) if tools else 0
