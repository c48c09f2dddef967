"""Writes for chats."""
from chatsite.chats.models import Chat
from chatsite.errors import Conflict, InvalidInput
from chatsite.pools.selectors import pool_for_tenant
from chatsite.runs.models import GenerationRun

MAX_TITLE_CHARS = 200


def _clean_title(title) -> str:
    if title is None:
        return ""
    if not isinstance(title, str):
        raise InvalidInput("title must be a string", field="title")
    title = " ".join(title.split())
    if len(title) > MAX_TITLE_CHARS or "\x00" in title:
        raise InvalidInput(f"title must be at most {MAX_TITLE_CHARS} characters, without NUL bytes", field="title")
    return title


def chat_create(*, tenant, owner, model: str, title: str | None = None) -> Chat:
    """A new chat on pool `model`. Raises InvalidInput / ModelUnavailable for a bad model."""
    pool = pool_for_tenant(tenant, model)
    return Chat.objects.create(tenant=tenant, owner=owner, pool=pool, title=_clean_title(title))


def chat_update(*, chat: Chat, title=None, model: str | None = None) -> Chat:
    """Rename a chat and/or switch its model for the next turns."""
    fields = ["updated_at"]
    if title is not None:
        chat.title = _clean_title(title)
        fields.append("title")
    if model is not None:
        chat.pool = pool_for_tenant(chat.tenant, model)
        fields.append("pool")
    chat.save(update_fields=fields)
    return chat


def chat_delete(*, chat: Chat) -> None:
    """Delete a chat and its messages; refused while a reply is being generated."""
    if chat.runs.filter(status__in=[GenerationRun.Status.QUEUED, GenerationRun.Status.RUNNING]).exists():
        raise Conflict("a reply is still being generated in this chat; stop it first")
    chat.delete()
