"""Reads for runs, always scoped to the tenant and owner asking."""
from chatsite.errors import NotFound
from chatsite.runs.models import GenerationRun, ReplyFeedback
from chatsite.runs.store import turns as store_turns
from chatsite.runs.store.choices import run_choices as _choices

_BIGINT = range(-2**63, 2**63)


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


def run_choices(run: GenerationRun) -> list[GenerationRun]:
    """The choices of the completion whose first choice is `run`, in index order (a
    run admitted alone: [run]), with their pool and reply loaded, as saved. Scoped to
    its tenant."""
    return _choices(run_id=run.pk, tenant_id=run.tenant_id)


def reply_to_stop(*, tenant, user, chat_id, queued_id) -> tuple[int, int] | None:
    """(run id, reply message id) of the reply in progress a send now of `queued_id` stops, in
    one read: the oldest of the user's chat `chat_id` (a send now racing another's admission
    stops the reply, never the run steered to), while that message waits in it; None
    otherwise (nothing to stop, or no such chat or message: the caller says which). Read by
    the chat's key and checked for tenant and owner after (chat_get's reason), as values: it
    comes before the stop, which the rest of the request overlaps (a statement of the store's:
    the ORM's build of it took 2.7 ms of the request before the stop, the statement 0.1)."""
    try:
        chat_pk, item_pk = int(chat_id), int(queued_id)
    except (ValueError, TypeError, OverflowError):
        return None
    if chat_pk not in _BIGINT or item_pk not in _BIGINT:
        return None
    row = store_turns.reply_to_stop(chat_id=chat_pk, queued_id=item_pk)
    if row is None or row[2] != tenant.pk or row[3] != user.pk:
        return None
    return row[0], row[1]
