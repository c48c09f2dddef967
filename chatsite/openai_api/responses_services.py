"""Writes for the Responses API: a response is a run (source openai) in a chat, admitted
through the one door (chatsite.runs.admission) like every other run.

A new response makes a new chat holding its input; one with `previous_response_id`
is a new turn of that response's chat, asked right after its reply (a branch, when
other turns already follow it). `instructions` are the chat's system prompt for
this turn only, as OpenAI does not carry them over. The ResponseRecord keeps what
the response object echoes and the run cannot, written in the admission's transaction."""
from chatsite.openai_api.models import ResponseRecord
from chatsite.openai_api.responses_request import ResponseRequest
from chatsite.openai_api.responses_selectors import response_get
from chatsite.openai_api.services import key_caller
from chatsite.runs.admission import Ask, Branch, NewChat, Send, run_admit
from chatsite.runs.models import GenerationRun
from chatsite.runs.services import run_cancel
from chatsite.runs.services.chat_edits import chat_delete
from chatsite.tenancy.credentials import KeyRead


def response_create(*, key: KeyRead, request: ResponseRequest,
                    idempotency_key: str = "") -> tuple[GenerationRun, bool]:
    """A queued run answering the request's last input item, and its record; and True.
    One transaction: a refused request writes nothing. A repeat of the key owner's
    earlier call with the same Idempotency-Key and request returns that call's run, and
    False.

    Raises NotFound (field previous_response_id) for a previous response that is not
    this key's user's, and what chatsite.runs.admission.run_admit raises."""
    previous = None
    if request.previous_response_id is not None:
        previous = response_get(key=key.key, response_id=request.previous_response_id, field="previous_response_id")
        where = Branch(chat=previous.chat, after=previous.assistant_message, history=tuple(request.history))
    else:
        where = NewChat(model=request.model, history=tuple(request.history), listed=False)

    def record(admitted) -> None:
        ResponseRecord.objects.create(run=admitted.run, instructions=request.instructions, metadata=request.metadata,
                                      background=request.background, previous_run=previous)

    ask = Ask(caller=key_caller(key), where=where, turn=Send(request.content), source=GenerationRun.Source.OPENAI,
              model=request.model if previous is not None else None, sampling=request.sampling,
              system_prompt=request.instructions, idempotency_key=idempotency_key, also=record)
    admitted = run_admit(ask)
    return admitted.run, not admitted.replayed


def response_cancel(*, run: GenerationRun) -> GenerationRun:
    """Stop the response's run, keeping its partial reply (run_cancel). Idempotent."""
    return run_cancel(run=run)


def response_delete(*, run: GenerationRun) -> None:
    """Delete the response's conversation: its chat, with every response in it.
    Raises Conflict while a reply is still being generated in it."""
    chat_delete(chat=run.chat)
