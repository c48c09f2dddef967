"""Writes for chats: create, rename, settings. Deleting a chat and choosing another version
wait for the reply in progress: chatsite.runs.services.chat_edits."""
import json
import math

from django.conf import settings
from django.utils import timezone

from chatsite.chats import live
from chatsite.chats.models import Chat, Message
from chatsite.errors import InvalidInput
from chatsite.pools.selectors import pool_for_tenant
from chatsite.pools.tokens import count_tokens
from chatsite.tenancy.selectors import preferences_for
from chatsite.text import MAX_SYSTEM_PROMPT_CHARS, clean_text

MAX_TITLE_CHARS = 200
MAX_HISTORY_MESSAGES = 200
UNSET = object()  # "leave this setting as it is" (None clears it)


def _clean_title(title) -> str:
    if title is None:
        return ""
    if not isinstance(title, str):
        raise InvalidInput("title must be a string", field="title")
    return clean_text(" ".join(title.split()), field="title", max_chars=MAX_TITLE_CHARS, allow_empty=True)


def _pool(tenant, model):
    if model is None or model == "":
        raise InvalidInput("model is required; GET /api/models/ lists the models you can use", field="model")
    return pool_for_tenant(tenant, model)


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


def chat_new(*, tenant, owner, pool, title: str | None = None, listed: bool = True, system_prompt=UNSET,
             temperature=UNSET, max_tokens=UNSET) -> Chat:
    """A chat on `pool` (the caller checked the tenant may use it) with its title and
    settings checked, not saved: the run's admission writes it with its first turn. A
    listed chat (the web's, the REST API's) without a system prompt gets the owner's
    default instructions (their settings page). Raises InvalidInput naming a bad title or
    setting."""
    chat = Chat(tenant=tenant, owner=owner, pool=pool, title=_clean_title(title), listed=listed)
    if system_prompt is UNSET and listed:
        system_prompt = preferences_for(owner).default_instructions
    _apply_settings(chat, system_prompt=system_prompt, temperature=temperature, max_tokens=max_tokens)
    return chat


def chat_create(*, tenant, owner, model: str, title: str | None = None, system_prompt=UNSET, temperature=UNSET,
                max_tokens=UNSET) -> Chat:
    """A new chat on pool `model`, with optional settings (a system prompt, a
    temperature, a reply length) its runs use; without a system prompt, the owner's default
    instructions are its system prompt. Raises InvalidInput for a missing,
    unknown or disabled model and for a bad title or setting."""
    chat = chat_new(tenant=tenant, owner=owner, pool=_pool(tenant, model), title=title, system_prompt=system_prompt,
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


def history_rows(pool, history: list[dict]) -> list[dict]:
    """`history` ({role, content} dicts, oldest first; roles system, user, assistant or
    tool; content may be empty; an assistant's may have `tool_calls`, a tool's
    `tool_call_id`, both checked by the caller) checked, as the Message fields they are
    written with. Raises InvalidInput naming the message (`messages[i]...`)."""
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
