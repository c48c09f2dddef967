"""What a share link's viewer sees (chatsite.chats.sharing): the chat's chosen path as it is
now, and a reply in progress with its text so far and the URL to follow it live.

Read for the public page (chatsite.web.shared_views) and GET /api/shared/{token}
(chatsite.api.views_shared) alike, so both show the same thing. It names no user and
holds nothing of the chat but its title, its model and the path's messages: no other
versions, no settings (the system prompt stays the owner's), no feedback.

A reply in progress: `content` is its text so far (read from its stream, with the codec
every reader uses) and `live` says where that text ends (`have` tokens, the stream id
`last_event_id`); `events_url` streams it through the one outlet as the link, from its
start or after `last_event_id`. Either way the viewer ends with the owner's text."""
from dataclasses import dataclass

from rest_framework.fields import DateTimeField

from chatsite.chats.models import ChatShare, Message
from chatsite.chats.selectors import path_page
from chatsite.runs.access import share_events_token
from chatsite.runs.stream import log as stream_log

SHARED_MESSAGES = 200  # the newest messages of the path a link shows

_DATETIME = DateTimeField()


@dataclass(frozen=True)
class SharedChat:
    title: str
    model: str
    shared_at: str
    messages: list[dict]
    more_before: bool  # older messages on the path than the link shows


def _run(run, share: ChatShare) -> dict:
    out = {"id": run.pk, "status": run.status, "model": run.pool.name, "finish_reason": run.finish_reason,
           "events_url": None}
    if not run.is_terminal:
        token = share_events_token(run, share_id=share.pk, owner_id=share.chat.owner_id)
        out["events_url"] = f"/api/runs/{run.pk}/events?token={token}"
    return out


def _item(msg: Message, share: ChatShare) -> dict:
    run = getattr(msg, "run", None) if msg.role == Message.Role.ASSISTANT else None
    item = {"id": msg.pk, "role": msg.role, "content": msg.content,
            "created_at": _DATETIME.to_representation(msg.created_at),
            "run": _run(run, share) if run is not None else None, "live": None}
    if run is not None and not run.is_terminal:
        reply = stream_log.read(run.pk)
        item["live"] = {"have": reply.completion_tokens, "last_event_id": reply.last_token_id}
        item["content"] = msg.content + reply.text  # a continued reply starts with its text so far
    return item


def shared_chat(*, share: ChatShare) -> SharedChat:
    """The link's chat as it is now (`share` from sharing.share_by_token, with its chat)."""
    chat = share.chat
    page = path_page(chat=chat, limit=SHARED_MESSAGES)
    return SharedChat(title=str(chat), model=chat.pool.display_name or chat.pool.name,
                      shared_at=_DATETIME.to_representation(share.created_at),
                      messages=[_item(m, share) for m in page.messages if m.role != Message.Role.SYSTEM],
                      more_before=page.more_before)
