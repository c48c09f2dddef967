"""Reads for runs, always scoped to the tenant and owner asking."""
from django.db import connection

from chatsite.chats.models import Message
from chatsite.errors import NotFound
from chatsite.pools.models import ModelPool
from chatsite.rows import Columns, prepared, split, sql_in
from chatsite.runs.models import GenerationRun, ReplyFeedback


def runs_for(*, tenant, user):
    return GenerationRun.objects.filter(tenant=tenant, chat__owner=user).select_related("pool", "assistant_message")


def feedback_for(*, run_ids) -> dict:
    """{run id: its ReplyFeedback} for those of `run_ids` (runs already scoped by the caller) that have one."""
    return {f.run_id: f for f in ReplyFeedback.objects.filter(run_id__in=list(run_ids))}


def run_get(*, tenant, user, run_id) -> GenerationRun:
    """The run, or NotFound (404) when it is not this user's in this tenant."""
    try:
        return runs_for(tenant=tenant, user=user).get(pk=int(run_id))
    except (GenerationRun.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound("no such run") from None


_RUN, _POOL, _REPLY = Columns(GenerationRun, "r"), Columns(ModelPool, "p"), Columns(Message, "m")
# Plain SQL: every /v1 call reads it, and the ORM's compilation of this query (three
# tables' columns, an OR) cost the web more CPU than the rest of the call's admission.
# The runs by their keys alone, then checked for the tenant (as chats.selectors._BY_KEY:
# the (tenant, ...) indexes must not be read for them).
_CHOICES = prepared(
    f'WITH r AS MATERIALIZED (SELECT * FROM "{_RUN.table}" WHERE id = %s OR choice_of_id = %s) '
    f'SELECT {_RUN.sql}, {_POOL.sql}, {_REPLY.sql} FROM r '
    f'JOIN "{_POOL.table}" p ON p.id = r.pool_id JOIN "{_REPLY.table}" m ON m.id = r.assistant_message_id '
    f'WHERE r.tenant_id = %s ORDER BY r.choice_index')


def run_choices_admitted(run: GenerationRun) -> list[GenerationRun]:
    """run_choices() of a run that run_submit has just returned, from the instances it
    wrote (`run.admitted_choices`: they hold what the rows hold, pool and reply set), so
    not read back; for any other run, run_choices()."""
    admitted = getattr(run, "admitted_choices", None)
    return list(admitted) if admitted is not None else run_choices(run)


def run_choices(run: GenerationRun) -> list[GenerationRun]:
    """The choices of the completion whose first choice is `run`, in index order (a
    run admitted alone: [run]), with their pool and reply loaded, as saved. Scoped to
    its tenant."""
    with connection.cursor() as cur:
        cur.execute(_CHOICES, [run.pk, run.pk, run.tenant_id])
        rows = cur.fetchall()
    out = []
    for row in rows:
        choice, pool, reply = split(row, _RUN, _POOL, _REPLY)
        choice.pool, choice.assistant_message = pool, reply
        out.append(choice)
    return out


def queue_lateral(pool_alias: str) -> str:
    """`LATERAL (...) q`, for a statement that reads a pool as `pool_alias`: the pool's queued
    runs, the asking tenant's among them (its one parameter: the tenant's id) and the tenants
    with queued runs, on the (pool, status) index. What admission's shedding counts
    (chatsite.runs.services.shedding), read with the pool or the chat a call admits a run on
    instead of in a round trip of its own; the three columns come after the statement's others."""
    return (f'LATERAL (SELECT count(*), count(*) FILTER (WHERE r.tenant_id = %s), count(DISTINCT r.tenant_id) '
            f'FROM "{GenerationRun._meta.db_table}" r WHERE r.pool_id = {pool_alias}.id '
            f'AND r.status IN {sql_in([GenerationRun.Status.QUEUED])}) q')


def keep_queue_read(pool: ModelPool, tenant, counts) -> None:
    """Hand queue_lateral's three counts, read for `tenant`, to the admission that follows
    (shedding.pool_backlog takes them once)."""
    pool.queue_read = (tenant.pk, *counts)


def take_queue_read(pool: ModelPool, tenant):
    """The counts keep_queue_read left on `pool` for `tenant` (gone once taken), else None."""
    read = pool.__dict__.pop("queue_read", None)
    return read[1:] if read is not None and read[0] == tenant.pk else None
