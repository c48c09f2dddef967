"""Reads for runs, always scoped to the tenant and owner asking."""
from django.db import connection

from chatsite.chats.models import Message
from chatsite.errors import NotFound
from chatsite.pools.models import ModelPool
from chatsite.rows import Columns, prepared, split
from chatsite.runs.models import GenerationRun


def runs_for(*, tenant, user):
    return GenerationRun.objects.filter(tenant=tenant, chat__owner=user).select_related("pool", "assistant_message")


def run_get(*, tenant, user, run_id) -> GenerationRun:
    """The run, or NotFound (404) when it is not this user's in this tenant."""
    try:
        return runs_for(tenant=tenant, user=user).get(pk=int(run_id))
    except (GenerationRun.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound("no such run") from None


_RUN, _POOL, _REPLY = Columns(GenerationRun, "r"), Columns(ModelPool, "p"), Columns(Message, "m")
# Plain SQL: every /v1 call reads it, and the ORM's compilation of this query (three
# tables' columns, an OR) cost the web more CPU than the rest of the call's admission.
_CHOICES = prepared(
    f'SELECT {_RUN.sql}, {_POOL.sql}, {_REPLY.sql} FROM "{_RUN.table}" r '
    f'JOIN "{_POOL.table}" p ON p.id = r.pool_id JOIN "{_REPLY.table}" m ON m.id = r.assistant_message_id '
    f'WHERE r.tenant_id = %s AND (r.id = %s OR r.choice_of_id = %s) ORDER BY r.choice_index')


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
        cur.execute(_CHOICES, [run.tenant_id, run.pk, run.pk])
        rows = cur.fetchall()
    out = []
    for row in rows:
        choice, pool, reply = split(row, _RUN, _POOL, _REPLY)
        choice.pool, choice.assistant_message = pool, reply
        out.append(choice)
    return out
