"""Writes for chats: create, rename, settings, delete, choosing a version."""
import json
import math

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from chatsite.chats import live, tree
from chatsite.chats.models import Chat, Message
from chatsite.errors import Conflict, InvalidInput
from chatsite.pools.selectors import pool_for_tenant
from chatsite.pools.tokens import count_tokens
from chatsite.rows import Insert
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.shedding import pool_for_admission
from chatsite.runs.validation import clean_text
from chatsite.tenancy.selectors import preferences_for

MAX_TITLE_CHARS = 200
MAX_HISTORY_MESSAGES = 200
MAX_SYSTEM_PROMPT_CHARS = 8000
UNSET = object()  # "leave this setting as it is" (None clears it)
ACTIVE = (GenerationRun.Status.QUEUED, GenerationRun.Status.RUNNING)


def _clean_title(title) -> str:
    if title is None:
        return ""
    if not isinstance(title, str):
        raise InvalidInput("title must be a string", field="title")
    return clean_text(" ".join(title.split()), field="title", max_chars=MAX_TITLE_CHARS, allow_empty=True)


def _pool(tenant, model, *, admitting: bool = False):
    """The chat's pool; `admitting`: a run is admitted on it next, in this transaction
    (its queue is read with it, for that admission: shedding.pool_for_admission)."""
    if model is None or model == "":
        raise InvalidInput("model is required; GET /api/models/ lists the models you can use", field="model")
    return pool_for_admission(tenant, model) if admitting else pool_for_tenant(tenant, model)


def _apply_settings(chat: Chat, *, system_prompt, temperature, max_tokens) -> list[str]:
    """Validate and set the chat's own settings; returns the fields changed."""
    fields = []
    if system_prompt is not UNSET:
        chat.system_prompt = clean_text("" if system_prompt is None else system_prompt, field="system_prompt",
                                        max_chars=MAX_SYSTEM_PROMPT_CHARS, allow_empty=True).strip()
        fields.append("system_prompt")
    if temperature is not UNSET:
        if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
                                        or not math.isfinite(temperature) or not 0 <= temperature <= 2):
            raise InvalidInput("temperature must be a number from 0 to 2, or null for the model's default",
                               field="temperature")
        chat.temperature = None if temperature is None else float(temperature)
        fields.append("temperature")
    if max_tokens is not UNSET:
        limit = chat.pool.max_output_tokens
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or not 1 <= max_tokens <= limit):
            raise InvalidInput(f"max_tokens must be an integer from 1 to {limit} for model {chat.pool.name!r}, "
                               f"or null for the default", field="max_tokens")
        chat.max_tokens = max_tokens
        fields.append("max_tokens")
    return fields


def chat_build(*, tenant, owner, model: str, title: str | None = None, system_prompt=UNSET, temperature=UNSET,
               max_tokens=UNSET, admitting: bool = False) -> Chat:
    """chat_create's chat, checked but not saved (chatsite.chats.start saves it with its first
    message; `admitting`: a run is admitted on its pool next, see _pool)."""
    chat = Chat(tenant=tenant, owner=owner, pool=_pool(tenant, model, admitting=admitting), title=_clean_title(title))
    if system_prompt is UNSET:  # the owner's default instructions (their settings page)
        system_prompt = preferences_for(owner).default_instructions
    _apply_settings(chat, system_prompt=system_prompt, temperature=temperature, max_tokens=max_tokens)
    return chat


def chat_create(*, tenant, owner, model: str, title: str | None = None, system_prompt=UNSET, temperature=UNSET,
                max_tokens=UNSET) -> Chat:
    """A new chat on pool `model`, with optional settings (a system prompt, a
    temperature, a reply length) its runs use; without a system prompt, the owner's default
    instructions are its system prompt. Raises InvalidInput for a missing,
    unknown or disabled model and for a bad title or setting."""
    chat = chat_build(tenant=tenant, owner=owner, model=model, title=title, system_prompt=system_prompt,
                      temperature=temperature, max_tokens=max_tokens)
    chat.save()
    live.chat_event(chat, live.CHAT_CREATED, title=chat.title)
    return chat


def chat_update(*, chat: Chat, title=None, model: str | None = None, system_prompt=UNSET, temperature=UNSET,
                max_tokens=UNSET) -> Chat:
    """Rename a chat, switch its model for the next turns, and/or change its
    settings (None clears a setting). Raises InvalidInput naming the bad field."""
    fields = ["updated_at"]
    if title is not None:
        chat.title = _clean_title(title)
        fields.append("title")
    if model is not None:
        chat.pool = _pool(chat.tenant, model)
        fields.append("pool")
        if chat.max_tokens is not None and max_tokens is UNSET:
            max_tokens = min(chat.max_tokens, chat.pool.max_output_tokens)
    fields += _apply_settings(chat, system_prompt=system_prompt, temperature=temperature, max_tokens=max_tokens)
    chat.save(update_fields=fields)
    live.chat_event(chat, live.CHAT_UPDATED, title=chat.title)
    return chat


def _flag(value, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{field} must be true or false", field=field)
    return value


def chat_file(*, chat: Chat, pinned=UNSET, archived=UNSET) -> Chat:
    """Pin a chat to the head of its owner's list (or unpin it), and/or archive it (it leaves
    the list; search still finds it, and its page still opens) or restore it. Its place by
    date is kept: updated_at does not change. Raises InvalidInput unless each is true or false."""
    now, fields = timezone.now(), {}
    if pinned is not UNSET:
        fields["pinned_at"] = (chat.pinned_at or now) if _flag(pinned, "pinned") else None
    if archived is not UNSET:
        fields["archived_at"] = (chat.archived_at or now) if _flag(archived, "archived") else None
    if fields:
        Chat.objects.filter(pk=chat.pk).update(**fields)
        for name, value in fields.items():
            setattr(chat, name, value)
        live.chat_event(chat, live.CHAT_UPDATED, title=chat.title, pinned=chat.pinned_at is not None,
                        archived=chat.archived_at is not None)
    return chat


def chat_delete(*, chat: Chat) -> None:
    """Delete a chat and its messages; refused while a reply is being generated."""
    if chat.runs.filter(status__in=ACTIVE).exists():
        raise Conflict("a reply is still being generated in this chat; stop it first")
    live.chat_event(chat, live.CHAT_DELETED)
    chat.delete()


def message_select(*, chat: Chat, message: Message) -> int:
    """Make `message` (a version of its turn) part of the chosen path, down to the
    newest message below it; the next prompt follows that path. Returns the new
    leaf's id. Refused (Conflict) while a reply is being generated in the chat."""
    if message.replaced_by_id is not None:
        raise InvalidInput("this reply was continued; choose the continued one", field="message")
    with transaction.atomic():
        locked = Chat.objects.select_for_update().get(pk=chat.pk)
        if GenerationRun.objects.filter(chat=chat, status__in=ACTIVE).exists():
            raise Conflict("a reply is still being generated in this chat; wait for it or stop it first")
        leaf = tree.newest_below(chat_id=chat.pk, message_id=message.pk)
        locked.current_leaf_id = leaf
        locked.save(update_fields=["current_leaf"])  # choosing a version is not a change to list the chat by
        chat.current_leaf_id = leaf
        live.chat_event(chat, live.PATH_CHANGED, anchor=message.parent_id, leaf=leaf)
    return leaf


def _reserve_ids(n: int) -> list[int]:
    """`n` new message ids from the table's sequence, so a chain can be written in one INSERT."""
    with connection.cursor() as cur:
        cur.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                    [Message._meta.db_table, n])
        return [row[0] for row in cur.fetchall()]


def _history_rows(pool, history: list[dict]) -> list[dict]:
    if len(history) >= MAX_HISTORY_MESSAGES:
        raise InvalidInput(f"at most {MAX_HISTORY_MESSAGES} messages are allowed", field="messages")
    max_chars = settings.CHATSITE["MAX_MESSAGE_CHARS"]
    rows = []
    for i, item in enumerate(history):
        if item.get("role") not in Message.Role.values:
            raise InvalidInput(f"messages[{i}].role must be one of {', '.join(Message.Role.values)}",
                               field=f"messages[{i}].role")
        content = clean_text(item.get("content"), field=f"messages[{i}].content", max_chars=max_chars,
                             allow_empty=True)
        calls = item.get("tool_calls")  # checked by the caller (the OpenAI API's request parsing)
        tokens = count_tokens(pool.model, content + (json.dumps(calls) if calls else ""))
        rows.append({"role": item["role"], "content": content, "token_count": tokens, "tool_calls": calls,
                     "tool_call_id": item.get("tool_call_id", "")})
    return rows


def _write_chain(chat: Chat, ids: list[int], rows: list[dict], *, parent: Message | None) -> None:
    """One INSERT of `rows` as a path below `parent` (None: from the root), with ids `ids`."""
    first_depth = 0 if parent is None else parent.depth + 1
    Message.objects.bulk_create([
        Message(id=pk, chat=chat, parent_id=ids[i - 1] if i else (parent.pk if parent else None),
                depth=first_depth + i, **row)
        for i, (pk, row) in enumerate(zip(ids, rows))])


INSERT_CHAT = Insert(Chat)  # plain SQL (chatsite/rows.py): every /v1 call and REST start makes a chat


def chat_create_with_history(*, tenant, owner, model: str, history: list[dict]) -> Chat:
    """A new chat on pool `model` holding `history` ({role, content} dicts, oldest
    first; roles system, user, assistant or tool; content may be empty; an assistant's
    may have `tool_calls`, a tool's `tool_call_id`, both checked by the caller) as one path of
    messages, so that the next run's prompt is built from them. The chat is not
    listed in the web sidebar (the OpenAI-compatible API makes one per call). Call
    it inside a transaction with the run's admission, so a refused run leaves no chat behind.

    Raises InvalidInput for a bad model, role or content (field `messages[i]...`)."""
    pool = _pool(tenant, model, admitting=True)
    rows = _history_rows(pool, history)
    ids = _reserve_ids(len(rows)) if rows else []
    # The leaf is written before its row: the foreign key is checked at commit (deferred).
    chat, = INSERT_CHAT.save(Chat(tenant=tenant, owner=owner, pool=pool, listed=False,
                                   current_leaf_id=ids[-1] if ids else None))
    _write_chain(chat, ids, rows, parent=None)
    # What admission would read back under the chat's lock (chatsite.runs.services.admission):
    # the path's end and its depth. No other transaction can see this chat before ours commits.
    chat.created_path_end = (ids[-1], len(ids) - 1) if ids else (None, None)
    return chat


def chat_append_history(*, chat: Chat, after: Message, history: list[dict]) -> None:
    """Make the chat's chosen path end at `after` (a message of the chat), followed by
    `history` (as in chat_create_with_history, possibly empty) written below it, so
    that the next turn is asked right after them: a conversation continued from one
    of its earlier replies, even one that other turns already follow (a new branch).
    Call it inside a transaction with the run's admission, which re-checks under the
    chat's lock that no reply is being generated.

    Raises InvalidInput for a bad role or content (field `messages[i]...`), and
    Conflict while a reply is being generated in the chat."""
    if after.chat_id != chat.pk:
        raise InvalidInput("that message is not in this chat", field="message")
    rows = _history_rows(chat.pool, history)
    locked = Chat.objects.select_for_update().get(pk=chat.pk)
    if GenerationRun.objects.filter(chat=chat, status__in=ACTIVE).exists():
        raise Conflict("a reply is still being generated in this conversation; wait for it or stop it first")
    ids = _reserve_ids(len(rows)) if rows else []
    _write_chain(chat, ids, rows, parent=after)
    locked.current_leaf_id = chat.current_leaf_id = ids[-1] if ids else after.pk
    locked.save(update_fields=["current_leaf", "updated_at"])
