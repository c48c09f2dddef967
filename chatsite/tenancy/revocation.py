"""Revocation markers: how an open SSE stream (or an events token) learns, without
the database, that the access it was opened with has ended.

Each way in is a principal: an API key, a signed-in session, a user's sessions (all
of them: a password change), a user's membership of a tenant, the user, the tenant,
the chat the run belongs to, and a share link of that chat. Ending one (revoking a
key, signing out, changing a password, removing a membership, deactivating a user or
a tenant, deleting a chat, revoking a share link) records it in Postgres, in the transaction of the change (a Revocation row, the
durable record), and writes `revoked:{kind}:{id}` in Redis after it commits. The
value is when it happened, so a stream or token granted before then is cut off while
one granted after (a member added back, a session signed in after the change) is
not; keys, sessions, chats and share links never come back, so theirs is PERMANENT.

Redis is a cache of those rows: `revoked:loaded` is set once it holds them all. A
Redis that lost its data (restarted without persistence) has no such key, and the
first stream to notice writes every marker again from Postgres (`revocations_reload`)
before it lets anyone through.

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
from datetime import datetime, timedelta, timezone as dt_timezone

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.tenancy.models import Revocation

log = logging.getLogger(__name__)

KEY, SESSION, SESSIONS, MEMBER, USER, TENANT, CHAT = "key", "session", "sessions", "member", "user", "tenant", "chat"
SHARE = "share"  # a chat's share link (chatsite.chats.sharing): its viewers hold no account
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


def share_credential(share_id: int) -> str:
    return f"{SHARE}:{share_id}"


@dataclass(frozen=True)
class Grant:
    """Who may read a run's events, through which credential, since when (unix time).
    A share link's viewer has no account: the grant names the chat's owner (the link
    ends with the owner's access) and `share_id`, whose streams count against the link's
    own cap, not the owner's."""

    run_id: int
    chat_id: int
    tenant_id: int
    user_id: int
    credential: str  # key_credential(), session_credential(), share_credential(), or "" (none known)
    since: float
    share_id: int = 0  # a share link's viewer: the link

    def principals(self) -> list[tuple[str, str]]:
        """The principals whose ending cuts this grant off, as (kind, ident)."""
        found = [(CHAT, str(self.chat_id)), (MEMBER, f"{self.tenant_id}:{self.user_id}"), (USER, str(self.user_id)),
                 (TENANT, str(self.tenant_id))]
        if self.credential:
            kind, _, ident = self.credential.partition(":")
            found.append((kind, ident))
            if kind == SESSION:  # every session of the user (a password change)
                found.append((SESSIONS, str(self.user_id)))
        return found

    def marker_keys(self) -> list[str]:
        return [redis_keys.revoked(kind, ident) for kind, ident in self.principals()]

    def expired(self, now: float | None = None) -> bool:
        """Older than the markers are kept: it must be granted afresh."""
        return (now or time.time()) - self.since > settings.CHATSITE["REVOCATION_TTL_SECONDS"] - 60


def principal_revoke(*, kind: str, ident, permanent: bool = False) -> None:
    """Record that access through this principal ended now: in Postgres at once (with
    the caller's transaction), in Redis after it commits. Open streams granted through
    it close within SSE_REVOCATION_CHECK_SECONDS; events tokens issued before now stop
    working. A Redis failure is logged, not raised: the row stands, and streams learn
    it when the markers are next rebuilt, or when their runs end."""
    now = time.time()
    at = datetime.fromtimestamp(now, tz=dt_timezone.utc)
    Revocation.objects.filter(revoked_at__lt=at - timedelta(seconds=_ttl())).delete()  # past what Redis keeps
    Revocation.objects.update_or_create(kind=kind, ident=str(ident), defaults={"revoked_at": at,
                                                                              "permanent": permanent})
    key, value = redis_keys.revoked(kind, str(ident)), _value(permanent, now)

    def write():
        try:
            get_redis().set(key, value, ex=_ttl())
        except Exception:
            log.exception("could not record the revocation %s in Redis; streams learn it at the next rebuild", key)

    transaction.on_commit(write)


def _ttl() -> int:
    return settings.CHATSITE["REVOCATION_TTL_SECONDS"]


def _value(permanent: bool, at: float) -> str:
    return PERMANENT if permanent else repr(at)


def revocations_reload() -> int:
    """Write every marker Postgres records (those younger than REVOCATION_TTL_SECONDS)
    into Redis with the rest of its time, then `revoked:loaded`; returns how many. Run
    when Redis has lost them (a stream found `revoked:loaded` missing); idempotent, so
    several processes may run it at once."""
    now = time.time()
    cutoff = datetime.fromtimestamp(now - _ttl(), tz=dt_timezone.utc)
    rows = list(Revocation.objects.filter(revoked_at__gt=cutoff).values_list("kind", "ident", "revoked_at",
                                                                              "permanent"))
    pipe = get_redis().pipeline(transaction=False)
    for kind, ident, at, permanent in rows:
        left = max(1, int(at.timestamp() + _ttl() - now))
        pipe.set(redis_keys.revoked(kind, ident), _value(permanent, at.timestamp()), ex=left)
    pipe.set(redis_keys.revocations_loaded(), "1")
    pipe.execute()
    log.warning("revocation markers written again from Postgres (%d): Redis had lost them", len(rows))
    return len(rows)


def grant_revoked(grant: Grant) -> str | None:
    """The kind of the first principal whose ending cuts `grant` off, as Postgres records
    it (the durable rows the markers cache, judged by `is_revoked`, the markers' rule), or
    None: for a grant kept past its request (a queued message's, checked when its turn
    comes, in the transaction that admits it). One statement. Rows older than
    REVOCATION_TTL_SECONDS are pruned: the caller refuses an `expired` grant itself."""
    named = Q()
    for kind, ident in grant.principals():
        named |= Q(kind=kind, ident=ident)
    rows = Revocation.objects.filter(named).order_by("revoked_at").values_list("kind", "revoked_at", "permanent")
    return next((kind for kind, at, permanent in rows if is_revoked(_value(permanent, at.timestamp()), grant.since)),
                None)


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
