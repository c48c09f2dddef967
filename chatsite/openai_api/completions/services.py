"""Writes for the OpenAI-compatible API: one completion call becomes one run per choice
(and per prompt, for a text completion that sends several), through the one door
(chatsite.runs.admission) like every other run."""
from dataclasses import dataclass

from django.db import transaction

from chatsite.openai_api.completions.request import CompletionRequest
from chatsite.quotas.services import refusals_counted
from chatsite.runs.admission import Admitted, Ask, Caller, NewChat, Send, run_admit
from chatsite.runs.models import GenerationRun
from chatsite.runs.validation import clean_response_format
from chatsite.tenancy.credentials import KeyRead


@dataclass(frozen=True)
class Submitted:
    runs: list[GenerationRun]  # one per choice, in index order (pool and reply loaded); prompt by prompt
    replayed: bool  # an earlier call's runs, found by its Idempotency-Key

    @property
    def run(self) -> GenerationRun:
        """The first choice's run: it names the completion."""
        return self.runs[0]


def key_caller(read: KeyRead) -> Caller:
    """The key's owner, in its tenant, with the limits its read brought."""
    return Caller(read.tenant, read.user, limits=read.limits)


def prompt_key(idempotency_key: str, i: int) -> str:
    """The idempotency key of a text completion's prompt `i`: the call's for the first,
    and one derived from it for the others, so a repeat finds every prompt's runs."""
    return idempotency_key if not idempotency_key or i == 0 else f"{idempotency_key[:180]}#prompt{i}"


def completion_submit(*, key: KeyRead, request: CompletionRequest, idempotency_key: str = "") -> Submitted:
    """A new chat (not listed in the web chat) holding the request's earlier messages,
    and a queued run (source openai) for each of its n choices answering its last message
    (sibling replies); a text completion's prompts a chat each. The whole conversation
    reaches the model or the call is refused (context_length_exceeded). One transaction:
    a refused call writes nothing. A repeat of the key owner's earlier call with the same
    Idempotency-Key and body gets that call's runs.

    Raises what chatsite.runs.admission.run_admit raises (ServiceError subclasses)."""
    prompts = [(request.content, request.prompt_token_ids), *request.more_prompts]
    if len(prompts) == 1:  # the door's own transaction is the call's
        admitted = run_admit(_ask(key, request, *prompts[0], idempotency_key))
        return Submitted(list(admitted.runs), replayed=admitted.replayed)
    runs, replayed = [], True
    with refusals_counted(key.tenant), transaction.atomic():
        for i, (text, token_ids) in enumerate(prompts):
            admitted: Admitted = run_admit(_ask(key, request, text, token_ids, prompt_key(idempotency_key, i)))
            runs += admitted.runs
            replayed = replayed and admitted.replayed
    return Submitted(runs, replayed=replayed)


def _ask(key: KeyRead, request: CompletionRequest, text: str | None, token_ids: list | None,
         idempotency_key: str) -> Ask:
    """The door's Ask for one prompt of the call."""
    run_sampling = {}
    if request.tool_use is not None:
        content_format = clean_response_format(request.sampling.get("response_format"))  # the call's own
        run_sampling["tools"] = request.tool_use.as_run_tools(content_format=content_format)
        constraint = request.tool_use.constraint(content_format)
        if constraint is not None:  # a reply that must call a function is constrained to the call's JSON
            run_sampling["response_format"] = constraint
    where = NewChat(model=request.model, history=tuple(request.history), listed=False)
    turn = Send(text, tool_call_id=request.tool_call_id, role=request.role, token_ids=token_ids)
    return Ask(caller=key_caller(key), where=where, turn=turn, source=GenerationRun.Source.OPENAI,
               sampling=request.sampling, choices=request.n, raw_prompt=request.raw_prompt, whole_history=True,
               keeps_token_ids=False,  # a call's chat is its own: the next call sends its history again
               run_sampling=run_sampling, needs_tools=request.tools, idempotency_key=idempotency_key,
               digest_extra=request.digest)

