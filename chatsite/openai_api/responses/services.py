"""Writes for the Responses API: a response is a run (source openai) in a chat, admitted
through the one door (chatsite.runs.admission) like every other run.

A new response makes a new chat holding its input; one with `previous_response_id`
is a new turn of that response's chat, asked right after its reply (a branch, when
other turns already follow it). `instructions` are the chat's system prompt for
this turn only, as OpenAI does not carry them over. The ResponseRecord keeps what
the response object echoes and the run cannot, written in the admission's transaction."""
import logging

from django.db import transaction
from django.utils import timezone

from chatsite.chats.models import Chat, Message
from chatsite.errors import Conflict, InvalidInput
from chatsite.openai_api.completions.services import key_caller
from chatsite.openai_api.models import ResponseRecord
from chatsite.openai_api.responses.request import ResponseRequest
from chatsite.openai_api.responses.selectors import response_get, response_input
from chatsite.openai_api.tools.reader import read_whole
from chatsite.openai_api.tools.wire import call_id_prefix
from chatsite.runs.admission import Ask, Branch, NewChat, Send, run_admit
from chatsite.runs.models import GenerationRun
from chatsite.runs.services import run_cancel
from chatsite.runs.services.chat_edits import chat_delete
from chatsite.runs.stream import log as stream_log
from chatsite.runs.validation import clean_response_format
from chatsite.tenancy.credentials import KeyRead

log = logging.getLogger(__name__)

# What an unstored response's run keeps of its sampling: not what said what the reply was
# about (its functions, schemas and grammars, the prompt's token ids).
FORGOTTEN_SAMPLING = ("tools", "response_format", "guide", "prompt_token_ids", "logit_bias")
FORGET_BATCH = 200


def response_create(*, key: KeyRead, request: ResponseRequest,
                    idempotency_key: str = "") -> tuple[GenerationRun, bool]:
    """A queued run answering the request's last input item, and its record; and True.
    One transaction: a refused request writes nothing. A repeat of the key owner's
    earlier call with the same Idempotency-Key and request returns that call's run, and
    False. With tools, the run offers them (as a chat completion's), and the earlier
    replies of the conversation that called functions reach the model as its calls.

    Raises NotFound (field previous_response_id) for a previous response that is not
    this key's user's or was not stored; InvalidInput for a function output answering a
    call no one made; Conflict for the repeat of a response that was not stored and was
    answered; and what chatsite.runs.admission.run_admit raises."""
    previous = None
    if request.previous_response_id is not None:
        previous = response_get(key=key.key, response_id=request.previous_response_id, field="previous_response_id")
        where = Branch(chat=previous.chat, after=previous.assistant_message, history=tuple(request.history))
    else:
        where = NewChat(model=request.model, history=tuple(request.history), listed=False)
    run_sampling = {}
    if request.tool_use is not None:
        content_format = clean_response_format(request.sampling.get("response_format"))
        run_sampling["tools"] = request.tool_use.as_run_tools(content_format=content_format)
        if (constraint := request.tool_use.constraint(content_format)) is not None:
            run_sampling["response_format"] = constraint
    tools_asked = request.tool_use is not None or request.tool_call_id or any(
        m["role"] == "tool" for m in request.history)

    def record(admitted) -> None:
        if previous is not None:
            _calls_in_prompt(admitted.run, request)
        ResponseRecord.objects.create(run=admitted.run, instructions=request.instructions, metadata=request.metadata,
                                      background=request.background, previous_run=previous,
                                      options=request.options, stored=request.store)

    ask = Ask(caller=key_caller(key), where=where, source=GenerationRun.Source.OPENAI,
              turn=Send(request.content, role=request.role, tool_call_id=request.tool_call_id),
              model=request.model if previous is not None else None, sampling=request.sampling,
              system_prompt=request.instructions, run_sampling=run_sampling,
              needs_tools=("tools" if request.tool_use else "input") if tools_asked else None,
              idempotency_key=idempotency_key, also=record)
    admitted = run_admit(ask)
    if admitted.replayed and ResponseRecord.objects.filter(run=admitted.run, forgotten_at__isnull=False).exists():
        raise Conflict("the response this Idempotency-Key made was not stored (store: false) and has been "
                       "answered: it cannot be sent again; send a new key", field="Idempotency-Key")
    return admitted.run, not admitted.replayed


def _calls_in_prompt(run: GenerationRun, request: ResponseRequest) -> None:
    """The conversation's earlier replies that called functions, in the run's prompt as
    the calls they are (the chat holds each as the model wrote it: call markup or the
    calls' JSON), so the chat template shows them as calls, with the ids the function
    outputs answer. Raises InvalidInput for an output answering a call no one made."""
    replies = {}
    for earlier in (GenerationRun.objects.filter(chat_id=run.chat_id, sampling__has_key="tools")
                    .exclude(pk=run.pk).select_related("assistant_message")):
        content, calls = read_whole(earlier.assistant_message.content, earlier.sampling["tools"],
                                    call_id_prefix=call_id_prefix(earlier))
        if calls:
            replies[earlier.assistant_message.content] = {"content": content or "", "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in calls]}
    made = set()
    for message in run.prompt_snapshot:
        if message["role"] == "assistant" and not message.get("tool_calls") and message["content"] in replies:
            message.update(replies[message["content"]])
        made.update(call["id"] for call in message.get("tool_calls") or ())
    unanswerable = sorted(request.outside_call_ids - made)
    if unanswerable:
        raise InvalidInput(f"a function_call_output answers call {unanswerable[0][:60]!r}, which no function_call of "
                           "the input or of the previous response made", field="input")
    if replies:
        GenerationRun.objects.filter(pk=run.pk).update(prompt_snapshot=run.prompt_snapshot)


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


def response_forget(*, run_id: int) -> bool:
    """Erase what an unstored response (store: false) said, once its run has ended and
    is saved: its input and reply (the messages' text and calls, the prompt snapshot,
    the log probabilities and token details, the chat's title), its instructions,
    metadata, tools and text format, its run's sampling constraints, and its run stream.
    Kept: the run's record (model, status, finish reason, token counts, timings, seed,
    sampling knobs) and the tenant's usage, which billing reads. Idempotent; False
    (nothing done) while the run is not finished, or for a stored response."""
    with transaction.atomic():
        record = (ResponseRecord.objects.select_for_update().select_related("run")
                  .filter(run_id=run_id, stored=False, forgotten_at__isnull=True).first())
        if record is None or not record.run.is_terminal:
            return False
        run = record.run
        written = [m.pk for m in response_input(run=run)] + [run.assistant_message_id]
        Message.objects.filter(pk__in=written).update(content="", tool_calls=None)
        chat = Chat.objects.filter(pk=run.chat_id)
        if record.previous_run_id is None:  # its own chat: its title is this input's
            chat.update(title="")
        if record.instructions:  # the chat's system prompt is the latest turn's instructions
            chat.filter(system_prompt=record.instructions.strip()).update(system_prompt="")
        cached = (run.details or {}).get("cached_tokens")
        sampling = {k: v for k, v in run.sampling.items() if k not in FORGOTTEN_SAMPLING}
        GenerationRun.objects.filter(pk=run.pk).update(prompt_snapshot=[], logprobs=None, sampling=sampling,
                                                       details={"cached_tokens": cached} if cached else None)
        ResponseRecord.objects.filter(pk=record.pk).update(instructions=None, metadata={}, options={},
                                                           forgotten_at=timezone.now())
    stream_log.discard(run_id)
    return True


def responses_forget_ended() -> int:
    """response_forget for every unstored response whose run has ended and whose text
    is still kept (one whose client left before the end); returns how many."""
    ended = (ResponseRecord.objects.filter(stored=False, forgotten_at__isnull=True,
                                           run__status__in=GenerationRun.TERMINAL)
             .values_list("run_id", flat=True)[:FORGET_BATCH])
    forgotten = 0
    for run_id in ended:
        try:
            forgotten += response_forget(run_id=run_id)
        except Exception:  # one that cannot be forgotten now is tried again at the next sweep
            log.exception("response %s: could not forget it; trying again later", run_id)
    return forgotten
