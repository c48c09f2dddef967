"""Reads for chats and messages, always scoped to the tenant and owner asking."""
import re
from dataclasses import dataclass

from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchVector
from django.db import connection
from django.db.models import OuterRef, Q, Subquery

from chatsite.chats import tree
from chatsite.chats.models import SEARCH_CONFIG, Chat, Message
from chatsite.errors import InvalidInput, NotFound
from chatsite.pools.models import ModelPool
from chatsite.rows import Columns, fetch_one, prepared, split
from chatsite.runs.selectors import keep_queue_read, queue_lateral

MAX_QUERY_CHARS = 200
HIGHLIGHT = ("\u2063[", "]\u2063")  # marks around matches in a snippet (invisible separators, never in text)


def chats_for(*, tenant, user):
    return Chat.objects.filter(tenant=tenant, owner=user).select_related("pool")


def listed_chats_for(*, tenant, user, archived: bool | None = False):
    """The chats the web chat list shows: not those the OpenAI-compatible API made, and
    (`archived`) only those not archived (the default), only archived ones, or both (None)."""
    chats = chats_for(tenant=tenant, user=user).filter(listed=True)
    return chats if archived is None else chats.filter(archived_at__isnull=not archived)


_CHAT, _POOL = Columns(Chat, "c"), Columns(ModelPool, "p")
# The chat by its key alone, then checked for tenant and owner: given all three at once,
# the planner may take the (tenant, owner, updated_at) index, whose estimate ties with
# the key's when its statistics lag, and read every chat of the user (here 5 ms a
# statement at 4,000 chats, the largest item of a message's Postgres time).
_BY_KEY = f'WITH c AS MATERIALIZED (SELECT * FROM "{_CHAT.table}" WHERE id = %s) '
_CHAT_GET = prepared(
    f'{_BY_KEY}SELECT {_CHAT.sql}, {_POOL.sql} FROM c JOIN "{_POOL.table}" p ON p.id = c.pool_id '
    f'WHERE c.tenant_id = %s AND c.owner_id = %s')
# The same, and the pool's queue (its second parameter: the tenant), for a request that admits a run next.
_CHAT_GET_ADMITTING = prepared(
    f'{_BY_KEY}SELECT {_CHAT.sql}, {_POOL.sql}, q.* FROM c JOIN "{_POOL.table}" p ON p.id = c.pool_id, '
    f'{queue_lateral("p")} WHERE c.tenant_id = %s AND c.owner_id = %s')
_BIGINT = range(-2**63, 2**63)


def chat_get(*, tenant, user, chat_id, admitting: bool = False) -> Chat:
    """The chat with its pool, or NotFound (404) when it is not this user's in this
    tenant. In plain SQL: nearly every API request reads its chat (chatsite/rows.py).
    `admitting`: the request admits a run in the chat next; the pool's queue, which
    admission's shedding reads, comes in the same statement (runs.selectors.queue_lateral)."""
    try:
        pk = int(chat_id)
    except (ValueError, TypeError, OverflowError):
        raise NotFound("no such chat") from None
    if pk not in _BIGINT:
        row = None
    elif admitting:
        row = fetch_one(_CHAT_GET_ADMITTING, [pk, tenant.pk, tenant.pk, user.pk])
    else:
        row = fetch_one(_CHAT_GET, [pk, tenant.pk, user.pk])
    if row is None:
        raise NotFound("no such chat")
    chat, pool, *counts = split(row, _CHAT, _POOL)
    if admitting:
        keep_queue_read(pool, tenant, counts)
    chat.pool = pool
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


_VERSIONS = (f'SELECT id, parent_id FROM "{Message._meta.db_table}" WHERE chat_id = %s AND replaced_by_id IS NULL '
             f'AND (parent_id = ANY(%s) OR (%s AND parent_id IS NULL)) ORDER BY id')


def with_versions(*, chat: Chat, messages: list[Message]) -> list[Message]:
    """Set `versions` on each message: its siblings' ids, oldest first (itself among
    them). One statement, in plain SQL: every message POST's answer reads it."""
    parents = {m.parent_id for m in messages}
    siblings: dict[int | None, list[int]] = {}
    with connection.cursor() as cur:
        cur.execute(_VERSIONS, [chat.pk, [p for p in parents if p is not None], None in parents])
        for pk, parent in cur.fetchall():
            siblings.setdefault(parent, []).append(pk)
    for m in messages:
        m.versions = siblings.get(m.parent_id) or [m.pk]
    return messages


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
