"""A user's events, for every window that user has open: published by services,
after commit, and followed through chatsite.runs.outlet (the one way out).

Events are small, ids and titles only; a window fetches what it shows through the
API. Each is a JSON object under field `e` of one entry of the user's stream."""
import json
import logging

from django.db import transaction

from chatsite import redis_keys
from chatsite.redis_client import get_redis

log = logging.getLogger(__name__)

CHAT_CREATED = "chat.created"
CHAT_UPDATED = "chat.updated"
CHAT_DELETED = "chat.deleted"
PATH_CHANGED = "chat.path"  # a turn started, a reply continued or another version chosen
QUEUE_CHANGED = "chat.queue"  # a message queued, edited, withdrawn, retried, sent now (`interrupted`: the run it
# stops), started or refused


def publish(*, user_id: int, tenant_id: int, type: str, **data) -> None:
    """Add an event to the user's stream once the current transaction commits.
    Best effort: a Redis failure is logged, never raised (the write already happened)."""
    event = json.dumps({"type": type, "tenant": tenant_id, **data}, separators=(",", ":"))

    def send():
        key = redis_keys.user_events(user_id)
        try:
            pipe = get_redis().pipeline(transaction=False)
            pipe.xadd(key, {"e": event}, maxlen=redis_keys.USER_EVENTS_MAXLEN, approximate=True)
            pipe.expire(key, redis_keys.USER_EVENTS_TTL_SECONDS)
            pipe.execute()
        except Exception:
            log.warning("user %s: could not publish %s", user_id, type, exc_info=True)

    transaction.on_commit(send)


def chat_event(chat, type: str, **data) -> None:
    """Publish a chat's event to its owner, for a chat the sidebar lists."""
    if chat.listed:
        publish(user_id=chat.owner_id, tenant_id=chat.tenant_id, type=type, chat=chat.pk, **data)


def latest_id(user_id: int) -> str:
    """The id of the user's newest event ('0-0' for none): a page rendered now follows from it."""
    entries = get_redis().xrevrange(redis_keys.user_events(user_id), count=1)
    return entries[0][0] if entries else "0-0"
