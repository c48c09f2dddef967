"""A user's events, for every window that user has open: publishing (services,
after commit) and following (the SSE view, through the web process's stream hub).

Events are small, ids and titles only; a window fetches what it shows through the
API. Each is a JSON object under field `e` of one entry of the user's stream."""
import json
import logging

from django.db import transaction

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs.stream.hub import USERS, HubError, get_hub

log = logging.getLogger(__name__)

CHAT_CREATED = "chat.created"
CHAT_UPDATED = "chat.updated"
CHAT_DELETED = "chat.deleted"
PATH_CHANGED = "chat.path"  # a turn started, a reply continued or another version chosen


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


async def follow(user_id: int, last_id: str, timeout: float, wait=None):
    """Yield lists of (id, event dict) after `last_id` as they come; an empty list
    after each quiet `timeout`. Ends when Redis goes away (the client reconnects
    with the last id it saw), or when `wait(sub, timeout)` (a revocation guard's, in
    place of `sub.next(timeout)`) returns anything but a batch or None."""
    hub = get_hub(USERS)
    sub = await hub.subscribe(redis_keys.user_events(user_id), last_id)
    try:
        while True:
            try:
                batch = await (sub.next(timeout) if wait is None else wait(sub, timeout))
            except HubError as exc:
                log.warning("user %s: events stream ended: %s", user_id, exc)
                return
            if batch is not None and batch.__class__ is not list:
                return  # the guard said stop: the session or membership it was opened with ended
            yield [(entry_id, json.loads(fields["e"])) for entry_id, fields in batch or () if "e" in fields]
    finally:
        hub.unsubscribe(sub)
