"""Share links: a chat's owner lets anyone holding a link read the chat, without an account.

The token is `secrets.token_urlsafe(SHARE_TOKEN_BYTES)`, shown once when the link is made;
only its SHA-256 is stored, so the database never holds a working link. A link shows the
chat as it is when it is opened (its chosen path) and follows a reply in progress
(chatsite.web.shared_views, chatsite.api.views_shared). Revoking it ends it at once: the
row says when, and a permanent revocation marker (chatsite.tenancy.revocation, kind
`share`) ends the viewers following it live within SHARE_REVOCATION_CHECK_SECONDS.
Deleting the chat deletes its links (its own marker already ends their viewers).

Writes (`share_create`, `share_revoke`) take a chat the caller already holds
(chats.selectors.chat_get: tenant and owner checked); reads scope by that chat too,
except `share_by_token`, which is how a viewer without an account finds one."""
import hashlib
import secrets
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from chatsite.chats.models import Chat, ChatShare
from chatsite.errors import InvalidInput, NotFound
from chatsite.tenancy.models import Membership
from chatsite.tenancy.revocation import SHARE, principal_revoke

SHARE_TOKEN_BYTES = 24  # 192 bits: 32 URL-safe characters
MAX_TOKEN_CHARS = 64
MAX_LIVE_SHARES_PER_CHAT = 20


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class NewShare:
    share: ChatShare
    token: str  # shown once; only its hash is kept


def share_create(*, chat: Chat) -> NewShare:
    """A new link to `chat` (already scoped to its owner). Raises InvalidInput (400) when
    the chat has MAX_LIVE_SHARES_PER_CHAT live links already."""
    with transaction.atomic():
        Chat.objects.select_for_update().filter(pk=chat.pk).values_list("pk").get()  # one create at a time
        if shares_for(chat=chat).filter(revoked_at__isnull=True).count() >= MAX_LIVE_SHARES_PER_CHAT:
            raise InvalidInput(f"a chat can have at most {MAX_LIVE_SHARES_PER_CHAT} share links; revoke one first")
        token = secrets.token_urlsafe(SHARE_TOKEN_BYTES)
        return NewShare(ChatShare.objects.create(chat=chat, token_hash=_hash(token)), token)


def share_revoke(*, share: ChatShare) -> ChatShare:
    """End a link now: it opens nothing any more, and its live viewers are cut off within
    SHARE_REVOCATION_CHECK_SECONDS. Idempotent: a revoked link keeps its first revoked_at."""
    with transaction.atomic():
        updated = ChatShare.objects.filter(pk=share.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        if updated:
            principal_revoke(kind=SHARE, ident=share.pk, permanent=True)
    share.refresh_from_db(fields=["revoked_at"])
    return share


def shares_for(*, chat: Chat):
    """The chat's links, live and revoked, newest first."""
    return ChatShare.objects.filter(chat=chat).order_by("-created_at", "-id")


def share_get(*, chat: Chat, share_id) -> ChatShare:
    """One link of this (already scoped) chat, revoked or not, or NotFound (404)."""
    try:
        return ChatShare.objects.get(chat=chat, pk=int(share_id))
    except (ChatShare.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound("no such share link for this chat") from None


def share_by_token(token) -> ChatShare:
    """The live link this token opens, with its chat (and the chat's pool and tenant), or
    NotFound (404): unknown, malformed, revoked, or of a chat whose tenant or owner is no
    longer active all look the same."""
    if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_CHARS:
        raise NotFound("no such shared chat")
    share = (ChatShare.objects.select_related("chat__pool", "chat__tenant", "chat__owner")
             .filter(token_hash=_hash(token), revoked_at__isnull=True).first())
    if (share is None or not share.chat.tenant.is_active or not share.chat.owner.is_active
            or not Membership.objects.filter(tenant_id=share.chat.tenant_id, user_id=share.chat.owner_id).exists()):
        raise NotFound("no such shared chat")
    return share
