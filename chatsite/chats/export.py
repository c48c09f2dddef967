"""A chat as a document to download: Markdown (the chosen path) or JSON (every branch)."""
import json
import re

from django.core.serializers.json import DjangoJSONEncoder

from chatsite.chats import tree
from chatsite.chats.models import Chat, Message
from chatsite.chats.selectors import messages_for

ROLE_NAMES = {Message.Role.SYSTEM: "System", Message.Role.USER: "You", Message.Role.ASSISTANT: "Assistant",
              Message.Role.TOOL: "Tool result"}


def filename(chat: Chat, ext: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", str(chat)).strip("-").lower()[:60] or "chat"
    return f"{slug}-{chat.pk}.{ext}"


def _path(chat: Chat) -> list[int]:
    leaf = tree.leaf_id(chat)
    if leaf is None:
        return []
    depth = Message.objects.values_list("depth", flat=True).get(pk=leaf)
    return tree.path_ids(chat_id=chat.pk, from_id=leaf, limit=depth + 1)


def as_markdown(*, chat: Chat) -> str:
    """The chosen path: a heading per message, the model's text as it wrote it
    (Markdown already), the user's as written."""
    path = _path(chat)
    rows = {m.pk: m for m in messages_for(chat=chat).filter(pk__in=path)}
    parts = [f"# {chat}", "", f"Model: {chat.pool.name} · exported from chatsite"]
    if chat.system_prompt:
        parts += ["", "## System prompt", "", chat.system_prompt]
    for msg in (rows[pk] for pk in path if pk in rows):
        parts += ["", f"## {ROLE_NAMES[msg.role]}", "", msg.content or "*(no text)*"]
    return "\n".join(parts) + "\n"


def as_json(*, chat: Chat) -> str:
    """The chat, its settings and every message of every branch, with the chosen path's ids."""
    messages = [{"id": m.pk, "parent": m.parent_id, "role": m.role, "content": m.content,
                 "token_count": m.token_count, "created_at": m.created_at,
                 "replaced_by": m.replaced_by_id,
                 "model": m.run.pool.name if m.role == Message.Role.ASSISTANT and hasattr(m, "run") else None}
                for m in messages_for(chat=chat)]
    doc = {"chat": {"id": chat.pk, "title": chat.title, "model": chat.pool.name, "system_prompt": chat.system_prompt,
                    "temperature": chat.temperature, "max_tokens": chat.max_tokens, "created_at": chat.created_at,
                    "updated_at": chat.updated_at},
           "path": _path(chat), "messages": messages}
    return json.dumps(doc, cls=DjangoJSONEncoder, ensure_ascii=False, indent=2)
