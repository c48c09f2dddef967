"""A completion's n choices, read back (an idempotent repeat, a re-read after the end)."""
from chatsite.chats.models import Message
from chatsite.pools.models import ModelPool
from chatsite.runs.models import GenerationRun
from chatsite.runs.store.engine import Columns, fetch_all, prepared, split

_RUN, _POOL, _REPLY = Columns(GenerationRun, "r"), Columns(ModelPool, "p"), Columns(Message, "m")
# The runs by their keys alone, then checked for the tenant (as reads._CHAT_FOR_TURN:
# the (tenant, ...) indexes must not be read for them).
_CHOICES = prepared(
    f'WITH r AS MATERIALIZED (SELECT * FROM "{_RUN.table}" WHERE id = %s OR choice_of_id = %s) '
    f'SELECT {_RUN.sql}, {_POOL.sql}, {_REPLY.sql} FROM r '
    f'JOIN "{_POOL.table}" p ON p.id = r.pool_id JOIN "{_REPLY.table}" m ON m.id = r.assistant_message_id '
    f'WHERE r.tenant_id = %s ORDER BY r.choice_index')


def run_choices(*, run_id: int, tenant_id: int) -> list[GenerationRun]:
    """The choices of the completion whose first choice is `run_id`, in index order (a
    run admitted alone: itself), with their pool and reply set, as saved; none of
    another tenant's."""
    out = []
    for row in fetch_all(_CHOICES, [run_id, run_id, tenant_id]):
        choice, pool, reply = split(row, _RUN, _POOL, _REPLY)
        choice.pool, choice.assistant_message = pool, reply
        out.append(choice)
    return out
