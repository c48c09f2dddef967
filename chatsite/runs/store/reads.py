"""What admission reads first, in one round trip each: the chat a turn is sent in, with
its pool and the pool's queue; or the pool a new chat's turn asks for, with its queue."""
from dataclasses import dataclass

from chatsite.chats.models import Chat
from chatsite.errors import NotFound
from chatsite.pools.models import ModelPool
from chatsite.pools.selectors import plausible_pool_name
from chatsite.runs.store import queue
from chatsite.runs.store.engine import Columns, fetch_one, prepared, split

_CHAT, _POOL = Columns(Chat, "c"), Columns(ModelPool, "p")
_BIGINT = range(-2**63, 2**63)


@dataclass(frozen=True, slots=True)
class ChatRead:
    chat: Chat  # its pool set
    queue: queue.QueueCounts  # the chat's pool's queue


@dataclass(frozen=True, slots=True)
class PoolRead:
    pool: ModelPool | None  # None: no pool of that name
    queue: queue.QueueCounts | None


# The chat by its key alone, then checked for tenant and owner: given all three at once,
# the planner may take the (tenant, owner, updated_at) index, whose estimate ties with the
# key's when its statistics lag, and read every chat of the user (5 ms a statement at
# 4,000 chats). Parameters: the chat, the tenant (for the queue), the tenant, the owner.
_CHAT_FOR_TURN = prepared(
    f'WITH c AS MATERIALIZED (SELECT * FROM "{_CHAT.table}" WHERE id = %s) '
    f'SELECT {_CHAT.sql}, {_POOL.sql}, q.* FROM c JOIN "{_POOL.table}" p ON p.id = c.pool_id, '
    f'{queue.lateral("p")} WHERE c.tenant_id = %s AND c.owner_id = %s')
_POOL_FOR_TURN = prepared(f'SELECT {_POOL.sql}, q.* FROM "{_POOL.table}" p, {queue.lateral("p")} WHERE p.name = %s')


def chat_for_turn(*, tenant, user_id: int, chat_id) -> ChatRead:
    """The owner's chat with its pool (and `chat.tenant`, the caller's, set) and the pool's
    queue. Raises NotFound (404) when it is not this user's in this tenant: another
    tenant's chat is indistinguishable from a missing one."""
    try:
        pk = int(chat_id)
    except (ValueError, TypeError, OverflowError):
        raise NotFound("no such chat") from None
    row = fetch_one(_CHAT_FOR_TURN, [pk, tenant.pk, tenant.pk, user_id]) if pk in _BIGINT else None
    if row is None:
        raise NotFound("no such chat")
    chat, pool, *counts = split(row, _CHAT, _POOL)
    chat.pool, chat.tenant = pool, tenant
    return ChatRead(chat, queue.QueueCounts(*counts))


def pool_for_turn(*, tenant_id: int, name) -> PoolRead:
    """The pool named `name` and its queue (whether the tenant may use it is the caller's
    to check); PoolRead(None, None) for a name no pool has (or that cannot be one)."""
    if not plausible_pool_name(name):
        return PoolRead(None, None)
    row = fetch_one(_POOL_FOR_TURN, [tenant_id, name])
    if row is None:
        return PoolRead(None, None)
    return PoolRead(_POOL.build(row[:len(_POOL)]), queue.QueueCounts(*row[len(_POOL):]))
