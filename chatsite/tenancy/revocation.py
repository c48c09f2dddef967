"""Revocation markers: how an open SSE stream (or an events token) learns, without
the database, that the access it was opened with has ended.

Each way in is a principal: an API key, a signed-in session, a user's membership
of a tenant, the user, the tenant, and the chat the run belongs to. Ending one
(revoking a key, signing out, removing a membership, deactivating a user or a
tenant, deleting a chat) writes `revoked:{kind}:{id}` in Redis, after the
database change commits. The value is when it happened, so a stream or token
granted before then is cut off while one granted after (a member added back)
is not; keys, sessions and chats never come back, so theirs is PERMANENT.

A `Grant` is what a stream carries: the run, the tenant and user it was granted
to, the credential (key or session) and when. Streams check their grant's
markers at open and then every SSE_REVOCATION_CHECK_SECONDS (stream_guard.py),
one Redis call each time. A marker is kept REVOCATION_TTL_SECONDS; a stream
older than that re-authenticates (it is closed and the client reconnects).
"""
import hashlib
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from chatsite import redis_keys
from chatsite.redis_client import get_redis

log = logging.getLogger(__name__)

KEY, SESSION, MEMBER, USER, TENANT, CHAT = "key", "session", "member", "user", "tenant", "chat"
PERMANENT = "permanent"
# Hosts' clocks differ a little: a grant made this soon before a revocation counts as made after it.
CLOCK_SKEW_SECONDS = 1.0


def session_fingerprint(session_key: str) -> str:
    """Names a session in markers and tokens without revealing its key."""
    return hashlib.sha256(session_key.encode()).hexdigest()[:24]


def key_credential(key_id: int) -> str:
    return f"{KEY}:{key_id}"


def session_credential(session_key: str | None) -> str:
    return f"{SESSION}:{session_fingerprint(session_key)}" if session_key else ""


@dataclass(frozen=True)
class Grant:
    """Who may read a run's events, through which credential, since when (unix time)."""

    run_id: int
    chat_id: int
    tenant_id: int
    user_id: int
    credential: str  # key_credential(), session_credential(), or "" (none known)
    since: float

    def marker_keys(self) -> list[str]:
        keys = [redis_keys.revoked(CHAT, str(self.chat_id)),
                redis_keys.revoked(MEMBER, f"{self.tenant_id}:{self.user_id}"),
                redis_keys.revoked(USER, str(self.user_id)), redis_keys.revoked(TENANT, str(self.tenant_id))]
        if self.credential:
            keys.append(redis_keys.revoked(*self.credential.split(":", 1)))
        return keys

    def expired(self, now: float | None = None) -> bool:
        """Older than the markers are kept: it must be granted afresh."""
        return (now or time.time()) - self.since > settings.CHATSITE["REVOCATION_TTL_SECONDS"] - 60


def principal_revoke(*, kind: str, ident, permanent: bool = False) -> None:
    """Record that access through this principal ended now (after the current
    transaction commits). Open streams granted through it close within
    SSE_REVOCATION_CHECK_SECONDS; events tokens issued before now stop working.
    A Redis failure is logged, not raised: the database change stands, and the
    streams still end when their runs do."""
    key = redis_keys.revoked(kind, str(ident))
    value = PERMANENT if permanent else repr(time.time())

    def write():
        try:
            get_redis().set(key, value, ex=settings.CHATSITE["REVOCATION_TTL_SECONDS"])
        except Exception:
            log.exception("could not record the revocation %s; open streams of it run until their runs end", key)

    transaction.on_commit(write)


def is_revoked(value: str | None, since: float) -> bool:
    """Whether a marker's value cuts off a grant made at `since` (the rule stream_guard's script applies)."""
    if value is None:
        return False
    if value == PERMANENT:
        return True
    try:
        return float(value) >= since - CLOCK_SKEW_SECONDS
    except ValueError:
        return True
