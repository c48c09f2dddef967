"""Who may read a run's events, for the SSE consumer (sync; called via database_sync_to_async)."""
from chatsite.errors import ServiceError
from chatsite.runs import events
from chatsite.runs.models import GenerationRun
from chatsite.runs.selectors import run_get
from chatsite.tenancy.auth import bearer_token
from chatsite.tenancy.selectors import tenant_for_request
from chatsite.tenancy.services import api_key_authenticate


class Unauthenticated(ServiceError):
    status = 401
    code = "not_authenticated"


def authorize_run(scope, run_id) -> GenerationRun:
    """The run if the session user or the bearer key's user may read it; NotFound
    otherwise (another tenant's run is indistinguishable from a missing one)."""
    headers = dict(scope.get("headers", []))
    token = bearer_token(headers.get(b"authorization", b"").decode("latin-1"))
    if token:
        key = api_key_authenticate(token)
        if key is None:
            raise Unauthenticated("invalid or revoked API key")
        user, auth = key.user, key
    else:
        user, auth = scope.get("user"), None
        if user is None or not user.is_authenticated:
            raise Unauthenticated("sign in or send an API key as 'Authorization: Bearer KEY'")
    tenant = tenant_for_request(user, auth)
    return run_get(tenant=tenant, user=user, run_id=run_id)


def run_snapshot(run_id: int) -> bytes | None:
    """The SSE snapshot of a finished run from Postgres, or None if it is not finished."""
    run = GenerationRun.objects.select_related("assistant_message").filter(pk=run_id).first()
    if run is None or not run.is_terminal:
        return None
    if run.status == GenerationRun.Status.FAILED:
        code, _, message = run.error.partition(": ")
        terminal = events.Entry("0-0", events.ERROR, code=code or "error", message=message or run.error)
    else:
        terminal = events.Entry("0-0", events.DONE, finish_reason=run.finish_reason,
                                usage={"prompt_tokens": run.prompt_tokens, "completion_tokens": run.completion_tokens})
    return events.sse_snapshot(text=run.assistant_message.content, completion_tokens=run.completion_tokens,
                               terminal=terminal)
