"""Reads for the Responses API, scoped to the key's tenant and user."""
from chatsite.errors import NotFound
from chatsite.openai_api.responses_wire import run_id_of
from chatsite.runs.models import GenerationRun
from chatsite.runs.selectors import runs_for
from chatsite.tenancy.models import ApiKey


def response_get(*, key: ApiKey, response_id, field: str | None = None) -> GenerationRun:
    """The run of response `resp_<run id>` with its record, or NotFound (404, naming
    `field`) when it is not a response of this key's user in this tenant (a chat
    completion's run is not a response)."""
    run_id = run_id_of(response_id)
    run = None
    if run_id is not None:
        run = (runs_for(tenant=key.tenant, user=key.user).select_related("response_record", "chat__pool")
               .filter(pk=run_id, response_record__isnull=False).first())
    if run is None:
        raise NotFound(f"No response with id '{str(response_id)[:60]}' found.", field=field,
                       code="response_not_found")
    return run
