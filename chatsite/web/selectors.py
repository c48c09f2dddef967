"""Reads for the chat pages, scoped to the tenant and user asking.

The chat page is rendered with everything a person needs on first paint: the
sidebar, the models and the messages, including the text so far of a reply that
is still being generated (read from its stream), so a reload shows the text at
once and the browser attaches to the stream right after it."""
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from chatsite.api.serializers import RunSerializer
from chatsite.chats.models import Chat, Message
from chatsite.chats.selectors import chats_for, messages_for
from chatsite.pools.health import live_workers, pool_is_up
from chatsite.pools.selectors import pools_for_tenant
from chatsite.runs.stream import log as stream_log

SIDEBAR_LIMIT = 200  # chats listed in the sidebar
PAGE_MESSAGES = 400  # newest messages rendered on a chat page


@dataclass(frozen=True)
class ModelOption:
    id: str
    display_name: str
    up: bool


def model_options(*, tenant) -> list[ModelOption]:
    """The pools the tenant may use, and whether a live worker serves each."""
    workers = live_workers()
    return [ModelOption(p.name, p.display_name, pool_is_up(p.name, workers)) for p in pools_for_tenant(tenant)]


def sidebar_groups(*, tenant, user) -> list[tuple[str, list[Chat]]]:
    """The user's chats, newest first, in date groups ("Today", "Previous 7 days", ...)."""
    now = timezone.localtime()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    bounds = [("Today", today), ("Yesterday", today - timedelta(days=1)),
              ("Previous 7 days", today - timedelta(days=7)), ("Previous 30 days", today - timedelta(days=30))]
    groups: dict[str, list[Chat]] = {}
    for chat in chats_for(tenant=tenant, user=user)[:SIDEBAR_LIMIT]:
        label = next((name for name, start in bounds if chat.updated_at >= start), "Older")
        groups.setdefault(label, []).append(chat)
    return list(groups.items())


def live_reply(run_id: int) -> dict:
    """The text a run's stream holds so far, the token count it covers, and the
    stream id to resume after (the last token entry's, so the terminal entry, if
    any, is still sent to the browser). A broken stream (a gap) shows its text up to
    the gap; following it then ends with the gap's error."""
    reply = stream_log.read(run_id)
    return {"text": reply.text, "have": reply.completion_tokens, "last_event_id": reply.last_token_id}


def chat_messages(*, chat: Chat) -> list[dict]:
    """The chat's newest messages, oldest first, each with its run (as the API
    shows it) and, for a reply still being generated, its text so far."""
    rows = list(messages_for(chat=chat).exclude(role=Message.Role.SYSTEM).order_by("-id")[:PAGE_MESSAGES])
    out = []
    for msg in reversed(rows):
        run = getattr(msg, "run", None) if msg.role == Message.Role.ASSISTANT else None
        item = {"id": msg.pk, "role": msg.role, "content": msg.content,
                "run": RunSerializer(run).data if run is not None else None, "live": None}
        if run is not None and not run.is_terminal:
            item["live"] = live_reply(run.pk)
            item["content"] = item["live"]["text"]
        out.append(item)
    return out


def current_model(models: list[ModelOption], chat: Chat | None) -> ModelOption | None:
    """The chat's model, or for a new chat the first model that is up (else the first)."""
    if chat is not None:
        return next((m for m in models if m.id == chat.pool.name), ModelOption(chat.pool.name, chat.pool.display_name,
                                                                               False))
    return next((m for m in models if m.up), models[0] if models else None)
