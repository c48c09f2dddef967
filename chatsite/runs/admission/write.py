"""A planned turn written, under the chat's lock: its messages, its prompt snapshot,
its runs (one per choice, each with its seed and reservation), the chat's new path end."""
from typing import NamedTuple

from django.utils import timezone

from chatsite.chats import tree
from chatsite.chats.models import Message
from chatsite.chats.titles import auto_title
from chatsite.errors import Conflict, InvalidInput
from chatsite.pools.tokens import TEMPLATE_TOKENS_PER_MESSAGE, TEMPLATE_TOKENS_PER_PROMPT, count_tokens
from chatsite.runs.admission.ask import PENDING_REPLY, UNSET, Ask, Send, Steering
from chatsite.runs.admission.plan import Plan
from chatsite.runs.choices import choice_seeds
from chatsite.runs.models import GenerationRun
from chatsite.runs.store import turns as store
from inference.prompt import REFILL

HISTORY_LIMIT = 200  # messages considered for the prompt snapshot


class ReplyInProgress(Conflict):
    def __init__(self, run_id: int):
        super().__init__("a reply is still being generated in this chat; wait for it or stop it first")
        self.run_id = run_id


class QueueWaiting(Conflict):
    """Messages wait in the chat's queue: they go first (a message sent now can join them)."""

    def __init__(self):
        super().__init__("messages are waiting in this chat's queue and go first: wait for them to start, or "
                         "withdraw them (GET /api/chats/{id}/queue/ lists them)", code="queue_waiting")


def lock(plan: Plan, ask: Ask) -> None:
    """Lock an existing chat's row until the transaction ends (one turn at a time) and take
    what a turn changes of it as the lock found it."""
    chat = plan.chat
    lock = store.chat_lock(chat_id=chat.pk)
    chat.current_leaf_id, chat.title, chat.listed = lock.leaf_id, lock.title, lock.listed
    if ask.system_prompt is UNSET:  # else the turn's own, set by the plan
        chat.system_prompt = lock.system_prompt


def path_end(plan: Plan, ask: Ask) -> tuple[int | None, int | None, bool]:
    """Write the new chat (an existing one is locked already: `lock`) and any history the
    turn follows; the end of its chosen path after that (its last message's id and depth)
    and whether that message has messages after it. Raises QueueWaiting while messages wait
    in the chat's queue (unless this turn is the queue's own, starting its first), else
    ReplyInProgress while a reply is being generated in the chat (but the one a steered
    turn stops: Ask.steering)."""
    chat = plan.chat
    if plan.new:  # nobody else can see it yet: no lock to wait for, no reply in progress
        ids = store.message_ids(count=len(plan.history)) if plan.history else []
        chat.current_leaf_id = ids[-1] if ids else None
        store.chat_insert(chat=chat)
        _chain(chat, ids, plan.history, parent=None)
        return (ids[-1], len(ids) - 1, False) if ids else (None, None, False)
    end = store.path_end(chat_id=chat.pk, leaf_id=chat.current_leaf_id)
    if end.queue_waiting and not ask.from_queue:  # decided here, under the chat's lock: none overtakes the queue
        raise QueueWaiting()
    if end.active_run_id is not None and (ask.steering is None or end.active_run_id != ask.steering.run_id):
        raise ReplyInProgress(end.active_run_id)
    after = getattr(ask.where, "after", None)
    if after is None:
        return end.leaf_id, end.leaf_depth, end.branched
    if after.chat_id != chat.pk:  # a Branch: after one of the chat's replies, then its history
        raise InvalidInput("that message is not in this chat", field="message")
    ids = store.message_ids(count=len(plan.history)) if plan.history else []
    _chain(chat, ids, plan.history, parent=after)
    return (ids[-1], after.depth + len(ids), False) if ids else (after.pk, after.depth, True)


def _chain(chat, ids: list[int], rows: list[dict], *, parent: Message | None) -> None:
    if not rows:
        return
    first_depth = 0 if parent is None else parent.depth + 1
    store.chain_insert(messages=[
        Message(id=pk, chat=chat, parent_id=ids[i - 1] if i else (parent.pk if parent else None),
                depth=first_depth + i, **row)
        for i, (pk, row) in enumerate(zip(ids, rows))])


def messages(plan: Plan, ask: Ask, leaf: tuple[int | None, int | None]) -> tuple[Message, list[Message], int | None]:
    """The turn's messages, not written yet: (the question answered, the new replies, one
    per choice, the message after which the chosen path changed)."""
    chat, prefix = plan.chat, plan.continued
    if prefix is not None and store.has_replies(message_id=prefix.pk):
        raise InvalidInput("only the last reply of a conversation can be continued", field="message")
    if isinstance(ask.turn, Send):
        if plan.edit_of is not None:
            parent_id, depth = plan.edit_of.parent_id, plan.edit_of.depth
        else:
            parent_id, depth = leaf[0], 0 if leaf[0] is None else leaf[1] + 1
        role = Message.Role.TOOL if ask.turn.tool_call_id else ask.turn.role
        asked = Message(chat=chat, parent_id=parent_id, depth=depth, role=role, content=plan.content,
                        token_count=plan.tokens, tool_call_id=ask.turn.tool_call_id)
        anchor = parent_id
    else:
        asked, anchor = plan.asked, plan.asked.pk
    # The reply (a continued one starts with the text it carries on), then the other
    # choices' empty replies: versions of the same turn.
    replies = [Message(chat=chat, parent=asked, depth=asked.depth + 1, role=Message.Role.ASSISTANT,
                       content=prefix.content if prefix else "", token_count=prefix.token_count if prefix else 0)]
    replies += [Message(chat=chat, parent=asked, depth=asked.depth + 1, role=Message.Role.ASSISTANT)
                for _ in range(ask.choices - 1)]
    return asked, replies, anchor


def messages_insert(plan: Plan, asked: Message, replies: list[Message], *, prompt_from_depth: int | None) -> None:
    """Write the turn's messages (a continued reply is replaced by the one carrying it on),
    the replies with where their prompt's history starts when it did not fit whole."""
    for reply in replies:
        reply.prompt_from_depth = prompt_from_depth
    store.turn_insert(asked=asked, replies=replies)
    if plan.continued is not None:
        store.replace_reply(message_id=plan.continued.pk, by_id=replies[0].pk)


def runs(plan: Plan, ask: Ask, asked: Message, replies: list[Message], reservations: list,
         *, snapshot: list[dict], digest: str) -> list[GenerationRun]:
    """Write the turn's runs, and the chat's new path end, title and update time along."""
    chat, sampling = plan.chat, plan.sampling
    if not chat.title and isinstance(ask.turn, Send):
        chat.title = auto_title(plan.content)
    chat.current_leaf = replies[0]
    chat.updated_at = timezone.now()
    run_sampling = {**sampling.as_run_sampling(), **ask.run_sampling}
    made = [GenerationRun(
        tenant=chat.tenant, chat=chat, owner=ask.caller.user, user_message=asked, assistant_message=message,
        pool=plan.pool, tier=ask.tier, source=ask.source, seed=seed, max_tokens=sampling.max_tokens,
        sampling=run_sampling, choice_index=i, prompt_snapshot=snapshot, raw_prompt=ask.raw_prompt,
        keeps_token_ids=ask.keeps_token_ids,
        idempotency_key=ask.idempotency_key if i == 0 else "",  # the first choice holds the key
        request_digest=digest if i == 0 else "",
        reserved_tokens=reservation.reserved_tokens, budget_cap=reservation.budget_cap,
    ) for i, (message, reservation, seed) in enumerate(zip(replies, reservations,
                                                            choice_seeds(sampling.seed, ask.choices)))]
    store.runs_insert(runs=made, chat=chat)
    for run in made:
        run.pool = plan.pool
    return made


class Snapshot(NamedTuple):
    messages: list[dict]  # the prompt's messages, as the worker renders them
    tokens: int  # their estimated prompt tokens
    from_depth: int | None  # the depth of the oldest history message kept, when the history did not fit whole


def snapshot(plan: Plan, asked: Message, *, stable: bool = True, steering: Steering | None = None) -> Snapshot:
    """The chosen path's newest turns up to `asked` that fit the plan's room, oldest first,
    after the chat's system prompt and followed, for a continued reply, by its text so far
    (the worker carries on from it); their estimated prompt tokens; and, when the history
    does not fit whole, the depth of its oldest message kept. The worker re-checks with the
    real chat template.

    `stable` (the web chat's turns; an OpenAI conversation is refused instead of shortened):
    a history that does not fit whole starts where the prompt of the reply it builds on
    started, while that fits, else keeps the newest messages within REFILL of the room (and
    of HISTORY_LIMIT): the turns after it start alike until the room is full again, and
    their prompts' start is in the engine's prefix cache and the reply's kept ids. Dropping
    just enough each turn would start each with another message.

    `steering`: the reply before `asked` is still being written (a queued message sent now,
    admitted as that reply stops): it stands in the snapshot as a message naming its run
    (PENDING_REPLY), counted at its tokens so far, which the worker fills in once it is saved."""
    chat, pool, prefix = plan.chat, plan.pool, plan.continued
    used = TEMPLATE_TOKENS_PER_PROMPT + asked.token_count + TEMPLATE_TOKENS_PER_MESSAGE
    head, tail = [], []
    if chat.system_prompt:
        head = [{"role": Message.Role.SYSTEM, "content": chat.system_prompt}]
        used += count_tokens(pool.model, chat.system_prompt) + TEMPLATE_TOKENS_PER_MESSAGE
    if prefix is not None:
        tail = [{"role": Message.Role.ASSISTANT, "content": prefix.content}]
        used += prefix.token_count + TEMPLATE_TOKENS_PER_MESSAGE
    history = (tree.path_rows(chat_id=chat.pk, from_id=asked.parent_id, limit=HISTORY_LIMIT)
               if asked.parent_id else [])
    pending = steering is not None and history and asked.parent_id == steering.reply_id and not history[0][1]
    if pending:  # the reply being stopped: its text, not saved yet, counted as its tokens so far
        history[0] = (Message.Role.ASSISTANT, "", steering.tokens, None, "", history[0][5])
    # (depth, row), newest first; a reply with no text is never in a prompt, but the one being stopped
    rows = [(asked.depth - 1 - i, row) for i, row in enumerate(history)
            if (pending and i == 0) or not (row[0] == Message.Role.ASSISTANT and not row[1] and not row[3])]
    costs = [row[2] + TEMPLATE_TOKENS_PER_MESSAGE for _, row in rows]
    oldest_read = asked.depth - len(history)  # 0: the whole path was read
    if used + sum(costs) <= plan.room and oldest_read == 0:
        n = len(rows)
    elif not stable:
        n = _fitting(costs, room=plan.room - used, count=len(rows))
    else:
        since = prefix.prompt_from_depth if prefix is not None else (history[0][5] if history else None)
        n = sum(1 for depth, _ in rows if depth >= since) if since is not None and since >= oldest_read else 0
        if n == 0 or sum(costs[:n]) > plan.room - used:
            n = _fitting(costs, room=int(plan.room * REFILL) - used, count=int(HISTORY_LIMIT * REFILL))
    kept = rows[:n]
    from_depth = None if n == len(rows) and oldest_read == 0 else (kept[-1][0] if kept else asked.depth)
    messages = [_prompt_message(asked.role, asked.content, None, asked.tool_call_id)]
    messages += [_prompt_message(role, content, calls, call_id) for _, (role, content, _t, calls, call_id, _s) in kept]
    if pending and n:
        messages[1][PENDING_REPLY] = steering.run_id
    messages.reverse()
    return Snapshot(head + messages + tail, used + sum(costs[:n]), from_depth)


def _fitting(costs: list[int], *, room: int, count: int) -> int:
    """How many of the newest rows (their `costs`, newest first) fit `room`, at most `count`."""
    total, n = 0, 0
    for cost in costs[:count]:
        if total + cost > room:
            break
        total, n = total + cost, n + 1
    return n


def _prompt_message(role: str, content: str, tool_calls: list | None, tool_call_id: str) -> dict:
    """A message of the prompt snapshot: {role, content}, and an assistant's tool calls
    or a tool result's call id when it has them (the chat template reads both)."""
    message = {"role": role, "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if tool_call_id:
        message["tool_call_id"] = tool_call_id
    return message


def refuse_unless_whole(plan: Plan, ask: Ask, snapshot: list[dict], used: int) -> None:
    """An OpenAI client sends the whole conversation and expects all of it to reach the
    model: where the web chat would drop older messages to fit, refuse instead; and refuse
    tool definitions that leave no room with the messages. Replies with no text are never
    in a prompt."""
    if not ask.whole_history:
        return
    pool, sampling = plan.pool, plan.sampling
    sent = 1 + sum(1 for m in plan.history if m["content"] or m["role"] != "assistant" or m.get("tool_calls"))
    sent += 1 if plan.chat.system_prompt else 0  # the snapshot's head
    if len(snapshot) < sent:
        raise InvalidInput(
            f"the messages do not fit model {pool.name!r}: its context of {pool.context_length} tokens, "
            f"with room kept for a reply of up to {sampling.max_tokens} tokens, holds only the newest "
            f"{len(snapshot)} of your {sent} messages; shorten them or ask for fewer max_tokens",
            field="messages", code="context_length_exceeded")
    if used + plan.extra_tokens > plan.room:
        raise InvalidInput(
            f"the tools take about {plan.extra_tokens} tokens: with the messages they do not fit model "
            f"{pool.name!r}, whose context of {pool.context_length} tokens keeps room for a reply of up to "
            f"{sampling.max_tokens} tokens; send fewer or shorter tool definitions, or ask for fewer max_tokens",
            field="tools", code="context_length_exceeded")
