"""Writes for the Responses API: a response is a run (source openai) in a chat.

A new response makes a new chat holding its input; one with `previous_response_id`
is a new turn of that response's chat, asked right after its reply (a branch, when
other turns already follow it). `instructions` are the chat's system prompt for
this turn only, as OpenAI does not carry them over. The ResponseRecord keeps what
the response object echoes and the run cannot."""
from django.db import transaction

from chatsite.chats.services import chat_append_history, chat_create_with_history, chat_delete, chat_update
from chatsite.errors import Conflict, InvalidInput
from chatsite.openai_api.models import ResponseRecord
from chatsite.openai_api.responses_request import ResponseRequest
from chatsite.openai_api.responses_selectors import response_get
from chatsite.quotas.services import refusals_counted
from chatsite.runs.models import GenerationRun
from chatsite.runs.services import run_cancel, run_finalize, run_submit
from chatsite.tenancy.models import ApiKey


def _earlier(key: ApiKey, request: ResponseRequest, idempotency_key: str) -> GenerationRun | None:
    """The response an earlier request with this Idempotency-Key created, if any."""
    if not idempotency_key:
        return None
    run = (GenerationRun.objects.filter(tenant=key.tenant, idempotency_key=idempotency_key)
           .select_related("pool", "user_message", "chat").first())
    if run is None:
        return None
    if (run.chat.owner_id != key.user_id or not ResponseRecord.objects.filter(run=run).exists()
            or run.pool.name != request.model or run.user_message.content != request.content):
        raise Conflict("this Idempotency-Key was already used for another request; send a new key with a new "
                       "request", field="Idempotency-Key")
    return run


def response_create(*, key: ApiKey, request: ResponseRequest,
                    idempotency_key: str = "") -> tuple[GenerationRun, bool]:
    """A queued run answering the request's last input item, and its record; and
    True. One transaction: a refused request writes nothing. A repeated
    `idempotency_key` (a client's retry) returns the run the first request made, and
    False; a concurrent repeat may be refused with Conflict instead.

    Raises NotFound (field previous_response_id) for a previous response that is not
    this key's user's; Conflict while a reply is still being generated in that
    conversation, and for an Idempotency-Key already used for another request (another
    model or text); and what chat_create_with_history, chat_update and run_submit raise."""
    earlier = _earlier(key, request, idempotency_key)
    if earlier is not None:
        return earlier, False
    with refusals_counted(key.tenant), transaction.atomic():
        previous = None
        if request.previous_response_id is not None:
            previous = response_get(key=key, response_id=request.previous_response_id, field="previous_response_id")
            if not previous.is_terminal:
                # Its stream may have ended (a client read the last event) before its worker saved it: save it.
                run_finalize(run_id=previous.pk)
            chat = previous.chat
            chat_append_history(chat=chat, after=previous.assistant_message, history=request.history)
        else:
            chat = chat_create_with_history(tenant=key.tenant, owner=key.user, model=request.model,
                                            history=request.history)
        if request.instructions or chat.system_prompt:
            chat_update(chat=chat, system_prompt=request.instructions)
        run = run_submit(chat=chat, content=request.content, source=GenerationRun.Source.OPENAI,
                         model=request.model if previous else None,  # a new chat is on that model already
                         idempotency_key=idempotency_key, **request.sampling)
        ResponseRecord.objects.create(run=run, instructions=request.instructions, metadata=request.metadata,
                                      background=request.background, previous_run=previous)
        return run, True


def response_cancel(*, run: GenerationRun) -> GenerationRun:
    """Stop the response's run, keeping its partial reply (run_cancel). Idempotent for
    a background response. Raises InvalidInput for a finished response that was not a
    background one (OpenAI cancels only those); a running one is stopped all the same."""
    if run.is_terminal and not run.response_record.background:
        raise InvalidInput("only responses created with background: true can be cancelled; this one has "
                           "finished", code="not_cancellable")
    return run_cancel(run=run)


def response_delete(*, run: GenerationRun) -> None:
    """Delete the response's conversation: its chat, with every response in it.
    Raises Conflict while a reply is still being generated in it."""
    chat_delete(chat=run.chat)
