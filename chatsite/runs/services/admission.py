"""Admission: a turn becomes a queued run, in one transaction.

A turn is a new user message (at the end of the chosen path, or an edit: a new
version of an earlier message of the user's), a regenerated reply (a new version
of an assistant message), or a continued reply (one that stopped at the length
limit, carried on by a new run whose message replaces it). The prompt snapshot is
the path from the turn's user message up through its parents."""
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from chatsite import stage_trace
from chatsite.chats import live, tree
from chatsite.chats.models import Chat, Message
from chatsite.errors import Conflict, InvalidInput
from chatsite.pools.selectors import pool_for_tenant
from chatsite.pools.tokens import TEMPLATE_TOKENS_PER_MESSAGE, TEMPLATE_TOKENS_PER_PROMPT, count_tokens
from chatsite.quotas.services import quota_check_rate, quota_for, quota_reserve_choices, refusals_counted
from chatsite.rows import Insert, fetch_one, prepared, sql_in
from chatsite.runs.choices import MAX_CHOICES, choice_seeds
from chatsite.runs.dispatch import run_dispatch_choices
from chatsite.runs.models import GenerationRun
from chatsite.runs.queues import TIERS
from chatsite.runs.services.finalize import run_finalize
from chatsite.runs.services.availability import refuse_if_no_worker
from chatsite.runs.services.shedding import shed_if_overloaded
from chatsite.runs.stream import log as stream_log
from chatsite.runs.validation import clean_sampling, clean_text

HISTORY_LIMIT = 200  # messages considered for the prompt snapshot
ACTIVE = (GenerationRun.Status.QUEUED, GenerationRun.Status.RUNNING)
SEND, REGENERATE, CONTINUE = "send", "regenerate", "continue"
# What a continued reply keeps of the first run's sampling. Not response_format: a
# grammar restarted after the reply's first part would start a second JSON value.
CONTINUED_SAMPLING = ("temperature", "top_p", "stop", "ignore_eos", "top_k", "min_p", "frequency_penalty",
                      "presence_penalty", "repetition_penalty")


@dataclass(frozen=True)
class Turn:
    kind: str
    content: str = ""  # SEND: the user's message
    tokens: int = 0  # SEND: its tokens
    edit_of: Message | None = None  # SEND: the message this one is a new version of
    tool_call_id: str = ""  # SEND: the message is a tool's result for this call (role tool), not the user's
    role: str = ""  # SEND: the message's role when not the user's (a /v1 prefill, a system message alone)
    asked: Message | None = None  # REGENERATE, CONTINUE: the user message answered
    continued: Message | None = None  # CONTINUE: the reply carried on


@dataclass(frozen=True, slots=True)
class Order:
    """What the run is asked for: the pool, the cleaned sampling, the tier, where the
    request came from, its idempotency key, and the prompt tokens its snapshot may use."""
    pool: object
    sampling: object
    tier: str
    source: str
    idempotency_key: str
    room: int
    raw_prompt: bool = False
    choices: int = 1  # sibling replies, one run each (a /v1 call's n)


def run_submit(*, chat: Chat, content, edit_of: Message | None = None, tier: str = "interactive",
               source: str = GenerationRun.Source.API, idempotency_key: str = "",
               model: str | None = None, raw_prompt: bool = False, tool_call_id: str = "", choices: int = 1,
               role: str = Message.Role.USER, **sampling) -> GenerationRun:
    """Save the user's message (after the chat's chosen path, or as a new version of
    `edit_of`, a user message of the chat), an empty assistant message and a queued
    run, then (after commit) hand the run to its queue. A repeated `idempotency_key`
    returns the run it created the first time, also when the repeats race each other.
    `model` answers this one message with another pool than the chat's own.
    `sampling` is clean_sampling's keyword arguments (max_tokens, temperature, top_p,
    stop, seed, ignore_eos, top_k, min_p, the penalties, response_format); unset ones
    come from the chat's settings, then the pool's defaults. `raw_prompt`: the
    model gets `content` as it is, with no chat template and none of the chat's
    earlier messages (a text completion). `tool_call_id`: the message is a function's
    result (role tool) answering that call of the chat's last reply, not the user's.
    `role` assistant: the message is the start of the reply, which the model carries on
    (its run's reply holds the new text); system: a system message the model answers.
    `choices` (1..MAX_CHOICES) answers the
    message with that many sibling replies, each its own run with its own seed
    (choices.choice_seeds), admitted together (rate limit: one request; budget: the
    prompt once and max_tokens for each); the first choice's run is returned, the
    rest are its `other_choices`, and an idempotent repeat returns the first again.

    Raises InvalidInput (bad content, sampling, or a prompt that cannot fit the
    model's context), ModelUnavailable (503) when no worker of the pool is live and it
    does not queue when cold, and Conflict while a reply is still being
    generated in the chat; RateLimited (429) for the tenant's own limits and
    Overloaded (503) when the pool sheds load, both with a retry_after."""
    existing = _check_key(chat, idempotency_key)
    if existing is not None:
        return existing
    if isinstance(choices, bool) or not isinstance(choices, int) or not 1 <= choices <= MAX_CHOICES:
        raise InvalidInput(f"n (the number of choices) must be an integer from 1 to {MAX_CHOICES}", field="n")
    content = clean_text(content, field="content", max_chars=settings.CHATSITE["MAX_MESSAGE_CHARS"])
    if edit_of is not None and (edit_of.chat_id != chat.pk or edit_of.role != Message.Role.USER):
        raise InvalidInput("only a message you sent can be edited", field="message")
    pool = _pool(chat, model)
    sampling = _sampling(chat, pool, **sampling)
    tokens = count_tokens(pool.model, content)
    turn = Turn(SEND, content=content, tokens=tokens, edit_of=edit_of, tool_call_id=tool_call_id,
                role="" if role == Message.Role.USER else role)
    room = _room(chat, pool, sampling, tokens, what=f"the message is {tokens} tokens")
    return _admit(chat, turn, Order(pool, sampling, tier, source, idempotency_key, room, raw_prompt, choices))


def run_regenerate(*, chat: Chat, message: Message, max_tokens=None, temperature=None, top_p=None, seed=None,
                   tier: str = "interactive", source: str = GenerationRun.Source.API, idempotency_key: str = "",
                   model: str | None = None) -> GenerationRun:
    """A new version of the assistant reply `message`: a new empty assistant message
    beside it (same question) and a queued run; the chat's path follows the new one.
    Raises what run_submit raises, and InvalidInput when `message` is not a reply."""
    if message.chat_id != chat.pk or message.role != Message.Role.ASSISTANT or message.parent_id is None:
        raise InvalidInput("only a reply can be regenerated; edit your message to send it again", field="message")
    existing = _check_key(chat, idempotency_key)
    if existing is not None:
        return existing
    asked = Message.objects.get(pk=message.parent_id)
    pool = _pool(chat, model)
    sampling = _sampling(chat, pool, max_tokens=max_tokens, temperature=temperature, top_p=top_p, seed=seed)
    room = _room(chat, pool, sampling, asked.token_count, what=f"the question is {asked.token_count} tokens")
    return _admit(chat, Turn(REGENERATE, asked=asked), Order(pool, sampling, tier, source, idempotency_key, room))


def run_continue(*, chat: Chat, message: Message, max_tokens=None, tier: str = "interactive",
                 source: str = GenerationRun.Source.API, idempotency_key: str = "") -> GenerationRun:
    """Carry on the reply `message`, which stopped at the length limit: a new run
    (same model and sampling, up to `max_tokens` more tokens) whose assistant message
    starts with the reply's text and replaces it; its stream carries the new text only.
    Raises what run_submit raises, and InvalidInput for a reply that did not stop at
    the length limit, was already continued, or has messages after it."""
    first = GenerationRun.objects.filter(assistant_message=message).select_related("pool").first()
    if message.chat_id != chat.pk or first is None or first.finish_reason != "length":
        raise InvalidInput("only a reply that stopped at the length limit can be continued", field="message")
    if message.replaced_by_id is not None:
        raise InvalidInput("this reply was already continued", field="message")
    existing = _check_key(chat, idempotency_key)
    if existing is not None:
        return existing
    pool = pool_for_tenant(chat.tenant, first.pool.name, loaded=first.pool)
    kept = first.sampling or {}
    sampling = clean_sampling(pool, max_tokens=max_tokens, **{name: kept.get(name) for name in CONTINUED_SAMPLING})
    asked = Message.objects.get(pk=message.parent_id)
    tokens = asked.token_count + message.token_count + TEMPLATE_TOKENS_PER_MESSAGE
    room = _room(chat, pool, sampling, tokens, what=f"the question and the reply so far are {tokens} tokens")
    turn = Turn(CONTINUE, asked=asked, continued=message)
    return _admit(chat, turn, Order(pool, sampling, tier, source, idempotency_key, room))


class ReplyInProgress(Conflict):
    def __init__(self, run_id: int):
        super().__init__("a reply is still being generated in this chat; wait for it or stop it first")
        self.run_id = run_id


def _check_key(chat: Chat, key: str) -> GenerationRun | None:
    if not key:
        return None
    if not isinstance(key, str) or len(key) > 200:
        raise InvalidInput("Idempotency-Key must be at most 200 characters", field="Idempotency-Key")
    return _existing(chat, key)


def _existing(chat: Chat, key: str) -> GenerationRun | None:
    run = GenerationRun.objects.filter(tenant=chat.tenant, idempotency_key=key).first()
    if run is not None and run.chat_id != chat.pk:
        raise Conflict("this Idempotency-Key was already used for another chat", field="Idempotency-Key")
    return run


def _pool(chat: Chat, model):
    return pool_for_tenant(chat.tenant, chat.pool.name if model is None else model,
                           loaded=chat.pool if model is None else None)


def _sampling(chat: Chat, pool, *, max_tokens=None, temperature=None, **rest):
    """The client's values, else the chat's settings, else the pool's defaults."""
    if max_tokens is None and chat.max_tokens is not None:
        max_tokens = min(chat.max_tokens, pool.max_output_tokens)
    if temperature is None:
        temperature = chat.temperature
    return clean_sampling(pool, max_tokens=max_tokens, temperature=temperature, **rest)


def _room(chat: Chat, pool, sampling, tokens: int, *, what: str) -> int:
    """The prompt tokens the snapshot may use; raises InvalidInput when the turn
    itself (with the chat's system prompt) does not fit."""
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


def _admit(chat: Chat, turn: Turn, order: Order) -> GenerationRun:
    if order.tier not in TIERS:
        raise InvalidInput(f"tier must be one of {', '.join(TIERS)}", field="tier")
    refuse_if_no_worker(order.pool)
    shed_if_overloaded(order.pool, chat.tenant, arriving=order.choices)
    try:
        with refusals_counted(chat.tenant):
            return _admit_within_limits(chat, turn, order)
    except IntegrityError:
        existing = _existing(chat, order.idempotency_key) if order.idempotency_key else None
        if existing is None:
            raise
        return existing


def _admit_within_limits(chat: Chat, turn: Turn, order: Order) -> GenerationRun:
    quota = quota_for(chat.tenant)
    quota_check_rate(tenant=chat.tenant, quota=quota)
    try:
        with transaction.atomic(savepoint=_savepoint(chat, order)):
            return _create(chat, turn, order, quota)
    except ReplyInProgress as busy:
        # The previous reply's stream has ended but its worker has not saved it yet (the
        # terminal entry comes first): save it here (idempotent), then admit this turn.
        if not stream_log.has_ended(busy.run_id):
            raise
        run_finalize(run_id=busy.run_id)
        with transaction.atomic():
            return _create(chat, turn, order, quota)


def _savepoint(chat: Chat, order: Order) -> bool:
    """Whether admission inside a caller's transaction (a /v1 call's, which made the chat)
    needs a savepoint: only to recover from what it catches, a ReplyInProgress (never, for
    a chat this transaction made: nobody else can see it) or the IntegrityError of an
    idempotency key another call committed first. Without one, a failure rolls the
    caller's whole transaction back, as it should; and the SAVEPOINT and its RELEASE were
    two round trips of every /v1 call."""
    return getattr(chat, "created_path_end", None) is None or bool(order.idempotency_key)


# The admission transaction in plain SQL: every message sent runs it, and the ORM's
# compilation of its statements cost more CPU than Postgres spent on them
# (bench/lifecycle_cpu.py; chatsite/rows.py). The chat's row lock serializes the
# chat's turns; the checks after it are a statement of their own, so that they see
# what a turn that held the lock before this one committed.
_CHATS, _MESSAGES, _RUNS = Chat._meta.db_table, Message._meta.db_table, GenerationRun._meta.db_table
_LOCK_CHAT = prepared(
    f'SELECT current_leaf_id, title, system_prompt, listed FROM "{_CHATS}" WHERE id = %s FOR UPDATE')
# The chat's reply in progress, if any; the end of its chosen path and that message's
# depth (the newest message for chats written before they remembered one); and whether
# that message has replies or other turns after it already (then a message sent after
# it has versions, which the answer reads).
_BUSY_AND_LEAF = (f'WITH leaf AS (SELECT COALESCE(%s, (SELECT max(id) FROM "{_MESSAGES}" WHERE chat_id = %s)) AS id) '
                  f'SELECT (SELECT id FROM "{_RUNS}" WHERE chat_id = %s AND status IN {sql_in(ACTIVE)} LIMIT 1), leaf.id, '
                  f'(SELECT depth FROM "{_MESSAGES}" m WHERE m.id = leaf.id), '
                  f'EXISTS (SELECT 1 FROM "{_MESSAGES}" c WHERE c.parent_id = leaf.id) FROM leaf')
# Done by the run's INSERT, which is prepared with it.
_SAVE_CHAT = f'UPDATE "{_CHATS}" SET title = %s, current_leaf_id = %s, updated_at = %s WHERE id = %s'
_INSERT_MESSAGES, _INSERT_RUNS = Insert(Message), Insert(GenerationRun)


def _messages(chat: Chat, turn: Turn, leaf: tuple[int | None, int | None],
              choices: int) -> tuple[Message, list[Message], int | None]:
    """Write the turn's messages under the chat's lock: (the user message answered,
    the new assistant messages, one per choice, the message after which the chosen
    path changed). `leaf`: the chosen path's last message and its depth."""
    prefix = turn.continued
    if prefix is not None and Message.objects.filter(parent=prefix).exists():
        raise InvalidInput("only the last reply of a conversation can be continued", field="message")
    if turn.kind == SEND:
        if turn.edit_of is not None:
            parent_id, depth = turn.edit_of.parent_id, turn.edit_of.depth
        else:
            parent_id, depth = leaf[0], 0 if leaf[0] is None else leaf[1] + 1
        role = turn.role or (Message.Role.TOOL if turn.tool_call_id else Message.Role.USER)
        asked = Message(chat=chat, parent_id=parent_id, depth=depth, role=role, content=turn.content,
                        token_count=turn.tokens, tool_call_id=turn.tool_call_id)
        anchor = parent_id
    else:
        asked, anchor = turn.asked, turn.asked.pk
    # The reply (a continued one starts with the text it carries on), then the other
    # choices' empty replies: versions of the same turn.
    replies = [Message(chat=chat, parent=asked, depth=asked.depth + 1, role=Message.Role.ASSISTANT,
                       content=prefix.content if prefix else "", token_count=prefix.token_count if prefix else 0)]
    replies += [Message(chat=chat, parent=asked, depth=asked.depth + 1, role=Message.Role.ASSISTANT)
                for _ in range(choices - 1)]
    if turn.kind == SEND:  # the question and its replies in one statement
        _INSERT_MESSAGES.save_with_children(asked, replies, link="parent")
    else:
        _INSERT_MESSAGES.save(*replies)
    if prefix is not None:
        Message.objects.filter(pk=prefix.pk, replaced_by__isnull=True).update(replaced_by=replies[0])
    return asked, replies, anchor


def _create(chat: Chat, turn: Turn, order: Order, quota) -> GenerationRun:
    pool, sampling = order.pool, order.sampling
    created = getattr(chat, "created_path_end", None)  # a chat this transaction wrote (a /v1 call's)
    if created is None:
        with connection.cursor() as cur:
            cur.execute(_LOCK_CHAT, [chat.pk])
            chat.current_leaf_id, chat.title, chat.system_prompt, chat.listed = cur.fetchone()
    # A concurrent request with the same key may have committed while we waited for the lock.
    existing = _existing(chat, order.idempotency_key) if order.idempotency_key else None
    if existing is not None:
        return existing
    if created is None:
        active, *leaf, branched = fetch_one(_BUSY_AND_LEAF, [chat.current_leaf_id, chat.pk, chat.pk])
        if active is not None:
            raise ReplyInProgress(active)
    else:  # nobody else can see it yet: no lock to wait for, no reply in progress, its path as written
        leaf, branched = created, False
    asked, replies, anchor = _messages(chat, turn, tuple(leaf), order.choices)
    reply = replies[0]
    if turn.kind == SEND and turn.edit_of is None and not branched and len(replies) == 1:
        asked.versions, reply.versions = [asked.pk], [reply.pk]  # the answer need not read them (views_messages.posted)
    if not chat.title and turn.kind == SEND:
        chat.title = " ".join(turn.content.split())[:60]
    chat.current_leaf = reply
    chat.updated_at = timezone.now()
    snapshot, prompt_tokens = _snapshot(chat, pool, asked, order.room, prefix=turn.continued)
    reservations = quota_reserve_choices(
        tenant=chat.tenant, quota=quota, prompt_tokens=prompt_tokens, max_tokens=sampling.max_tokens,
        active_runs=lambda: GenerationRun.objects.filter(tenant=chat.tenant, status__in=ACTIVE).count(),
        choices=order.choices)
    runs = [GenerationRun(
        tenant=chat.tenant, chat=chat, user_message=asked, assistant_message=message, pool=pool,
        tier=order.tier, source=order.source, seed=seed, max_tokens=sampling.max_tokens,
        sampling=sampling.as_run_sampling(), choice_index=i, prompt_snapshot=snapshot, raw_prompt=order.raw_prompt,
        idempotency_key=order.idempotency_key if i == 0 else "",  # the first choice holds the key
        reserved_tokens=reservation.reserved_tokens, budget_cap=reservation.budget_cap,
    ) for i, (message, reservation, seed) in enumerate(zip(replies, reservations,
                                                            choice_seeds(sampling.seed, order.choices)))]
    # The chat's new path end and title are saved by the run's INSERT (one round trip).
    _INSERT_RUNS.save(runs[0], along=(_SAVE_CHAT, [chat.title, reply.pk, chat.updated_at, chat.pk]))
    stage_trace.mark("web.saved", runs[0].pk)
    if len(runs) > 1:  # the other choices name the first
        for run in runs[1:]:
            run.choice_of = runs[0]
        _INSERT_RUNS.save(*runs[1:])
    runs[0].admitted_choices = runs  # run_choices answers from these, as written (pool and reply set)
    # No worker can have served a chat this transaction made, and one choice pins none
    # (several are pinned together before dispatch): the router need not ask Redis.
    runs[0].unpinned = created is not None and len(runs) == 1
    transaction.on_commit(lambda: run_dispatch_choices(runs))
    live.chat_event(chat, live.PATH_CHANGED, anchor=anchor, leaf=reply.pk, run=runs[0].pk, title=chat.title)
    return runs[0]


def _snapshot(chat: Chat, pool, asked: Message, room: int, *, prefix: Message | None) -> tuple[list[dict], int]:
    """The chosen path's newest turns up to `asked` that fit `room` prompt tokens,
    oldest first, after the chat's system prompt and followed, for a continued reply,
    by its text so far (the worker carries on from it); and their estimated prompt
    tokens. The worker re-checks with the real chat template."""
    used = TEMPLATE_TOKENS_PER_PROMPT + asked.token_count + TEMPLATE_TOKENS_PER_MESSAGE
    head, tail = [], []
    if chat.system_prompt:
        head = [{"role": Message.Role.SYSTEM, "content": chat.system_prompt}]
        used += count_tokens(pool.model, chat.system_prompt) + TEMPLATE_TOKENS_PER_MESSAGE
    if prefix is not None:
        tail = [{"role": Message.Role.ASSISTANT, "content": prefix.content}]
        used += prefix.token_count + TEMPLATE_TOKENS_PER_MESSAGE
    kept = [_prompt_message(asked.role, asked.content, None, asked.tool_call_id)]
    history = tree.path_rows(chat_id=chat.pk, from_id=asked.parent_id, limit=HISTORY_LIMIT) if asked.parent_id else []
    for role, content, token_count, tool_calls, tool_call_id in history:
        if role == Message.Role.ASSISTANT and not content and not tool_calls:
            continue  # a reply that failed or was stopped before its first token
        cost = token_count + TEMPLATE_TOKENS_PER_MESSAGE
        if used + cost > room:
            break
        used += cost
        kept.append(_prompt_message(role, content, tool_calls, tool_call_id))
    kept.reverse()
    return head + kept + tail, used


def _prompt_message(role: str, content: str, tool_calls: list | None, tool_call_id: str) -> dict:
    """A message of the prompt snapshot: {role, content}, and an assistant's tool calls
    or a tool result's call id when it has them (the chat template reads both)."""
    message = {"role": role, "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if tool_call_id:
        message["tool_call_id"] = tool_call_id
    return message
