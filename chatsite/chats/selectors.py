"""Reads for chats and messages, always scoped to the tenant and owner asking."""
import re
from dataclasses import dataclass

from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchVector
from django.db.models import OuterRef, Q, Subquery

from chatsite.chats import tree
from chatsite.chats.models import SEARCH_CONFIG, Chat, Message, QueuedMessage
from chatsite.errors import InvalidInput, NotFound

MAX_QUERY_CHARS = 200
HIGHLIGHT = ("\u2063[", "]\u2063")  # marks around matches in a snippet (invisible separators, never in text)


def chats_for(*, tenant, user):
    return Chat.objects.filter(tenant=tenant, owner=user).select_related("pool")


def listed_chats_for(*, tenant, user, archived: bool | None = False):
    """The chats the web chat list shows: not those the OpenAI-compatible API made, and
    (`archived`) only those not archived (the default), only archived ones, or both (None)."""
    chats = chats_for(tenant=tenant, user=user).filter(listed=True)
    return chats if archived is None else chats.filter(archived_at__isnull=not archived)


_BIGINT = range(-2**63, 2**63)


def chat_get(*, tenant, user, chat_id) -> Chat:
    """The chat with its pool, or NotFound (404) when it is not this user's in this
    tenant. Found by its key alone, then checked for tenant and owner: given all three,
    the planner may read every chat of the user through the (tenant, owner) index."""
    try:
        pk = int(chat_id)
    except (ValueError, TypeError, OverflowError):
        raise NotFound("no such chat") from None
    chat = Chat.objects.select_related("pool").filter(pk=pk).first() if pk in _BIGINT else None
    if chat is None or chat.tenant_id != tenant.pk or chat.owner_id != user.pk:
        raise NotFound("no such chat")
    chat.tenant = tenant  # the caller's, already loaded: services reading chat.tenant need no query
    return chat


def _messages(chat: Chat):
    return Message.objects.filter(chat=chat).select_related("run", "run__pool")


def message_get(*, chat: Chat, message_id) -> Message:
    """One message of this (already scoped) chat, or NotFound (404)."""
    try:
        return _messages(chat).get(pk=int(message_id))
    except (Message.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound("no such message in this chat") from None


def messages_for(*, chat: Chat):
    """Every message of the chat, every branch, oldest first."""
    return _messages(chat).order_by("id")


@dataclass
class PathPage:
    messages: list[Message]  # oldest first
    count: int  # messages on the whole path
    more_before: bool  # older messages on the path than this page's first


def _fetch(chat: Chat, ids: list[int]) -> list[Message]:
    rows = {m.pk: m for m in _messages(chat).filter(pk__in=ids)}
    return [rows[i] for i in ids if i in rows]


def path_page(*, chat: Chat, limit: int, before=None, after=None, offset: int | None = None) -> PathPage:
    """One page of the chat's chosen path, oldest first: the newest `limit`
    messages, or those just `before` a message, or those just `after` one, or
    from `offset` (counted from the first message).

    Raises NotFound for a `before`/`after` message not in the chat, InvalidInput
    for one that is not on the chosen path."""
    leaf = tree.leaf_id(chat)
    if leaf is None:
        return PathPage([], 0, False)
    leaf_depth = Message.objects.filter(pk=leaf).values_list("depth", flat=True).get()
    count = leaf_depth + 1
    if after is not None:
        anchor = message_get(chat=chat, message_id=after)
        below = leaf_depth - anchor.depth
        ids = tree.path_ids(chat_id=chat.pk, from_id=leaf, limit=below + 1) if below >= 0 else []
        if not ids or ids[0] != anchor.pk:
            raise InvalidInput(f"message {anchor.pk} is not on the chat's chosen path", field="after")
        return PathPage(_fetch(chat, ids[1:1 + limit]), count, True)
    if before is not None:
        anchor = message_get(chat=chat, message_id=before)
        if anchor.parent_id is None:
            return PathPage([], count, False)
        ids = tree.path_ids(chat_id=chat.pk, from_id=anchor.parent_id, limit=limit)
        return PathPage(_fetch(chat, ids), count, bool(ids) and anchor.depth - len(ids) > 0)
    if offset is not None:
        ids = tree.path_ids(chat_id=chat.pk, from_id=leaf, limit=count)[offset:offset + limit]
        return PathPage(_fetch(chat, ids), count, offset > 0)
    ids = tree.path_ids(chat_id=chat.pk, from_id=leaf, limit=limit)
    return PathPage(_fetch(chat, ids), count, count > len(ids))


def versions_of(*, chat: Chat, messages: list[Message]) -> dict[int, list[int]]:
    """Each message's versions: its siblings' ids, oldest first (itself among them), by
    message id. One query."""
    parents = {m.parent_id for m in messages}
    siblings: dict[int | None, list[int]] = {}
    near = Q(parent_id__in=[p for p in parents if p is not None])
    if None in parents:
        near |= Q(parent_id__isnull=True)
    for pk, parent in (Message.objects.filter(near, chat=chat, replaced_by__isnull=True).order_by("id")
                       .values_list("id", "parent_id")):
        siblings.setdefault(parent, []).append(pk)
    return {m.pk: siblings.get(m.parent_id) or [m.pk] for m in messages}


def _tsquery(text) -> SearchQuery:
    """Every word must match, the last one as a prefix (results while typing)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("q must be the words to search for", field="q")
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInput(f"q is at most {MAX_QUERY_CHARS} characters", field="q")
    words = re.findall(r"\w+", text)[:12]
    if not words:
        raise InvalidInput("q has no words to search for", field="q")
    raw = " & ".join(words[:-1] + [words[-1] + ":*"])
    return SearchQuery(raw, config=SEARCH_CONFIG, search_type="raw")


def chat_search(*, tenant, user, q, limit: int = 20) -> list[Chat]:
    """The user's listed chats, archived ones too, whose title or any message matches `q` (Postgres
    full-text search), newest first, each with `snippet`: a matching message's
    text around the match ('' when only the title matched), matches marked with HIGHLIGHT.

    Raises InvalidInput for an empty or too long query."""
    query = _tsquery(q)
    chats = listed_chats_for(tenant=tenant, user=user, archived=None)
    hits = Message.objects.annotate(sv=SearchVector("content", config=SEARCH_CONFIG)).filter(
        sv=query, chat__tenant=tenant, chat__owner=user, chat__listed=True)
    snippet = (hits.filter(chat=OuterRef("pk")).order_by("-id")
               .annotate(s=SearchHeadline("content", query, config=SEARCH_CONFIG, start_sel=HIGHLIGHT[0],
                                          stop_sel=HIGHLIGHT[1], max_words=18, min_words=8))
               .values("s")[:1])
    found = (chats.annotate(tv=SearchVector("title", config=SEARCH_CONFIG))
             .filter(Q(tv=query) | Q(pk__in=hits.values("chat_id")))
             .annotate(snippet=Subquery(snippet)).order_by("-updated_at", "-id")[:limit])
    out = list(found)
    for chat in out:
        chat.snippet = chat.snippet or ""
    return out


def queue_of(*, chat: Chat) -> list[QueuedMessage]:
    """The chat's queue (chatsite.runs.services.queued): the messages refused when their turn
    came, until retried or withdrawn (oldest first), then those waiting their turn, the next first."""
    State = QueuedMessage.State
    items = list(QueuedMessage.objects.filter(chat=chat, state__in=(State.REFUSED, State.QUEUED)))
    refused = sorted((m for m in items if m.state == State.REFUSED), key=lambda m: (m.updated_at, m.pk))
    return refused + sorted((m for m in items if m.state == State.QUEUED), key=lambda m: (m.position, m.pk))


def queued_places(*, chat: Chat) -> dict[int, int]:
    """Each waiting message's place in its chat's queue (1: it starts next)."""
    ids = QueuedMessage.objects.filter(chat=chat, state=QueuedMessage.State.QUEUED).order_by(
        "position", "id").values_list("id", flat=True)
    return {pk: place for place, pk in enumerate(ids, 1)}
