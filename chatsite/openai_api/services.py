"""Writes for the OpenAI-compatible API: one completion call becomes one run per choice,
through the one door (chatsite.runs.admission) like every other run."""
from dataclasses import dataclass

from chatsite.openai_api.request import CompletionRequest
from chatsite.runs.admission import Ask, Caller, NewChat, Send, run_admit
from chatsite.runs.models import GenerationRun
from chatsite.tenancy.credentials import KeyRead


@dataclass(frozen=True)
class Submitted:
    runs: list[GenerationRun]  # one per choice, in index order (pool and reply loaded)
    replayed: bool  # an earlier call's runs, found by its Idempotency-Key

    @property
    def run(self) -> GenerationRun:
        """The first choice's run: it names the completion."""
        return self.runs[0]


def key_caller(read: KeyRead) -> Caller:
    """The key's owner, in its tenant, with the limits its read brought."""
    return Caller(read.tenant, read.user, limits=read.limits)


def completion_submit(*, key: KeyRead, request: CompletionRequest, idempotency_key: str = "") -> Submitted:
    """A new chat (not listed in the web chat) holding the request's earlier messages, and
    a queued run (source openai) for each of its n choices answering its last message
    (sibling replies). The whole conversation reaches the model or the call is refused
    (context_length_exceeded), and a refused call writes nothing. A repeat of the key
    owner's earlier call with the same Idempotency-Key and body gets that call's runs.

    Raises what chatsite.runs.admission.run_admit raises (ServiceError subclasses)."""
    run_sampling = {}
    if request.tool_use is not None:
        run_sampling["tools"] = request.tool_use.as_run_tools()
        constraint = request.tool_use.constraint()
        if constraint is not None:  # a reply that must call a function is constrained to the call's JSON
            run_sampling["response_format"] = constraint
    ask = Ask(caller=key_caller(key), where=NewChat(model=request.model, history=tuple(request.history), listed=False),
              turn=Send(request.content, tool_call_id=request.tool_call_id), source=GenerationRun.Source.OPENAI,
              sampling=request.sampling, choices=request.n, raw_prompt=request.raw_prompt, whole_history=True,
              run_sampling=run_sampling, needs_tools=request.tools, idempotency_key=idempotency_key, digest_extra=request.digest)
    admitted = run_admit(ask)
    return Submitted(list(admitted.runs), replayed=admitted.replayed)
