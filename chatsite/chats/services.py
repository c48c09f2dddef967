"""Writes for chats."""
from django.conf import settings

from chatsite.chats.models import Chat, Message
from chatsite.errors import Conflict, InvalidInput
from chatsite.pools.selectors import pool_for_tenant
from chatsite.pools.tokens import count_tokens
from chatsite.runs.models import GenerationRun
from chatsite.runs.validation import clean_text

MAX_TITLE_CHARS = 200
MAX_HISTORY_MESSAGES = 200


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


def chat_create(*, tenant, owner, model: str, title: str | None = None) -> Chat:
    """A new chat on pool `model`. Raises InvalidInput for a missing, unknown or
    disabled model and for a bad title."""
    pool = _pool(tenant, model)
    return Chat.objects.create(tenant=tenant, owner=owner, pool=pool, title=_clean_title(title))


def chat_update(*, chat: Chat, title=None, model: str | None = None) -> Chat:
    """Rename a chat and/or switch its model for the next turns."""
    fields = ["updated_at"]
    if title is not None:
        chat.title = _clean_title(title)
        fields.append("title")
    if model is not None:
        chat.pool = _pool(chat.tenant, model)
        fields.append("pool")
    chat.save(update_fields=fields)
    return chat


def chat_delete(*, chat: Chat) -> None:
    """Delete a chat and its messages; refused while a reply is being generated."""
    if chat.runs.filter(status__in=[GenerationRun.Status.QUEUED, GenerationRun.Status.RUNNING]).exists():
        raise Conflict("a reply is still being generated in this chat; stop it first")
    chat.delete()


def chat_create_with_history(*, tenant, owner, model: str, history: list[dict]) -> Chat:
    """A new chat on pool `model` holding `history` ({role, content} dicts, oldest
    first; roles system, user or assistant; content may be empty) as its messages,
    so that the next run's prompt is built from them. Call it inside a transaction
    with the run's admission, so a refused run leaves no chat behind.

    Raises InvalidInput for a bad model, role or content (field `messages[i]...`)."""
    pool = _pool(tenant, model)
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
        rows.append((item["role"], content))
    chat = Chat.objects.create(tenant=tenant, owner=owner, pool=pool)
    Message.objects.bulk_create([Message(chat=chat, role=role, content=content,
                                         token_count=count_tokens(pool.model, content)) for role, content in rows])
    return chat
