"""Reads for the chat pages, scoped to the tenant and user asking.

The chat page is rendered with everything a person needs on first paint: the
sidebar, the models and the messages, including the text so far of a reply that
is still being generated (read from its stream), so a reload shows the text at
once and the browser attaches to the stream right after it."""
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import quote

from django.utils import timezone
from rest_framework.fields import DateTimeField

from chatsite.api.serializers import RunSerializer
from chatsite.chats.models import Chat, Message
from chatsite.chats.selectors import listed_chats_for, path_page, versions_of
from chatsite.pools.health import live_workers, pool_is_up
from chatsite.pools.selectors import pools_for_tenant
from chatsite.runs.selectors import feedback_for
from chatsite.runs.stream import log as stream_log

SIDEBAR_LIMIT = 50  # chats in the sidebar's first page; older ones load on scroll (GET /api/chats/?before=)
PAGE_MESSAGES = 40  # newest messages of the chosen path on a chat page; older ones load on scroll


@dataclass(frozen=True)
class ModelOption:
    id: str
    display_name: str
    up: bool


def model_options(*, tenant) -> list[ModelOption]:
    """The pools the tenant may use, and whether a live worker serves each."""
    workers = live_workers()
    return [ModelOption(p.name, p.display_name, pool_is_up(p.name, workers)) for p in pools_for_tenant(tenant)]


def date_group(when, now=None) -> str:
    """The sidebar's date group for a chat last changed at `when` (static/js/sidebar.js has the same bounds)."""
    now = now or timezone.localtime()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    bounds = [("Today", today), ("Yesterday", today - timedelta(days=1)),
              ("Previous 7 days", today - timedelta(days=7)), ("Previous 30 days", today - timedelta(days=30))]
    return next((name for name, start in bounds if when >= start), "Older")


PINNED = "Pinned"


def sidebar_groups(*, tenant, user) -> tuple[list[tuple[str, list[Chat]]], str | None]:
    """The pinned chats (newest pin first), then the newest other listed chats in date groups
    ("Today", "Previous 7 days", ...), archived ones left out; and the URL of the next (older)
    page, or None."""
    listed = listed_chats_for(tenant=tenant, user=user)
    pinned = list(listed.filter(pinned_at__isnull=False).order_by("-pinned_at")[:SIDEBAR_LIMIT])
    rows = list(listed.filter(pinned_at__isnull=True)[:SIDEBAR_LIMIT + 1])
    now = timezone.localtime()
    groups: dict[str, list[Chat]] = {PINNED: pinned} if pinned else {}
    for chat in rows[:SIDEBAR_LIMIT]:
        groups.setdefault(date_group(chat.updated_at, now), []).append(chat)
    nxt = None
    if len(rows) > SIDEBAR_LIMIT:
        last = rows[SIDEBAR_LIMIT - 1]
        stamp = DateTimeField().to_representation(last.updated_at)  # as the API writes it
        nxt = (f"/api/chats/?listed=true&archived=false&pinned=false&limit={SIDEBAR_LIMIT}"
               f"&before={quote(f'{stamp},{last.pk}')}")
    return list(groups.items()), nxt


def live_reply(run_id: int) -> dict:
    """The text a run's stream holds so far, the token count it covers, and the
    stream id to resume after (the last token entry's, so the terminal entry, if
    any, is still sent to the browser). A broken stream (a gap) shows its text up to
    the gap; following it then ends with the gap's error."""
    reply = stream_log.read(run_id)
    return {"text": reply.text, "have": reply.completion_tokens, "last_event_id": reply.last_token_id}


def message_item(msg: Message, versions: dict, feedback=None) -> dict:
    """A message as the page's script reads it (the API's shape, plus the text so far
    of a reply still being generated, and the feedback its asker gave it). `versions`:
    versions_of()'s, for this message."""
    run = getattr(msg, "run", None) if msg.role == Message.Role.ASSISTANT else None
    item = {"id": msg.pk, "role": msg.role, "content": msg.content, "parent": msg.parent_id,
            "versions": versions.get(msg.pk) or [msg.pk],
            "run": RunSerializer(run).data if run is not None else None, "live": None,
            "feedback": {"rating": feedback.rating, "comment": feedback.comment} if feedback else None}
    if run is not None and not run.is_terminal:
        item["live"] = live_reply(run.pk)
        item["content"] = msg.content + item["live"]["text"]  # a continued reply starts with its text so far
    return item


def chat_messages(*, chat: Chat) -> tuple[list[dict], bool]:
    """The chosen path's newest messages, oldest first, with their versions, each
    run (as the API shows it) and a running reply's text so far; and whether older
    messages remain to load."""
    page = path_page(chat=chat, limit=PAGE_MESSAGES)
    msgs = [m for m in page.messages if m.role != Message.Role.SYSTEM]
    versions = versions_of(chat=chat, messages=msgs)
    run_ids = {m.pk: m.run.pk for m in msgs if m.role == Message.Role.ASSISTANT and getattr(m, "run", None)}
    feedback = feedback_for(run_ids=run_ids.values()) if run_ids else {}
    return [message_item(m, versions, feedback.get(run_ids.get(m.pk))) for m in msgs], page.more_before


def current_model(models: list[ModelOption], chat: Chat | None) -> ModelOption | None:
    """The chat's model, or for a new chat the first model that is up (else the first)."""
    if chat is not None:
        return next((m for m in models if m.id == chat.pool.name), ModelOption(chat.pool.name, chat.pool.display_name,
                                                                               False))
    return next((m for m in models if m.up), models[0] if models else None)
