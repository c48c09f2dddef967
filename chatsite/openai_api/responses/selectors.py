"""Reads for the Responses API, scoped to the key's tenant and user."""
from chatsite.chats import tree
from chatsite.chats.models import Message
from chatsite.errors import NotFound
from chatsite.openai_api.responses.wire import run_id_of
from chatsite.runs.models import GenerationRun
from chatsite.runs.selectors import runs_for
from chatsite.tenancy.models import ApiKey

INPUT_LIMIT = 1000  # messages one response's input may have written (chats.services keeps it to 200)


def response_get(*, key: ApiKey, response_id, field: str | None = None) -> GenerationRun:
    """The run of response `resp_<run id>` with its record, or NotFound (404, naming
    `field`) when it is not a stored response of this key's user in this tenant (a
    chat completion's run is not a response; one created with store: false is not
    readable once answered)."""
    run_id = run_id_of(response_id)
    run = None
    if run_id is not None:
        run = (runs_for(tenant=key.tenant, user=key.user).select_related("response_record", "chat__pool")
               .filter(pk=run_id, response_record__isnull=False, response_record__stored=True).first())
    if run is None:
        raise NotFound(f"No response with id '{str(response_id)[:60]}' found.", field=field,
                       code="response_not_found")
    return run


def response_input(*, run: GenerationRun) -> list[Message]:
    """The messages a response's input wrote, oldest first: below the reply it continued
    (from the chat's start when it continued none) down to the one it answers."""
    ids = tree.path_ids(chat_id=run.chat_id, from_id=run.user_message_id, limit=INPUT_LIMIT)
    previous = run.response_record.previous_run_id
    if previous is not None:
        before = GenerationRun.objects.filter(pk=previous).values_list("assistant_message_id", flat=True).first()
        ids = ids[ids.index(before) + 1:] if before in ids else ids[-1:]
    by_id = Message.objects.in_bulk(ids)
    return [by_id[i] for i in ids if i in by_id]
