"""Reads for runs, always scoped to the tenant and owner asking."""
from chatsite.errors import NotFound
from chatsite.runs.models import GenerationRun, ReplyFeedback
from chatsite.runs.store.choices import run_choices as _choices


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
