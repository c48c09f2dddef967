"""Writes for the OpenAI-compatible API: one completion call becomes one run per choice."""
import json
from dataclasses import dataclass

from django.db import transaction

from chatsite.chats.services import chat_create_with_history
from chatsite.errors import Conflict, InvalidInput
from chatsite.openai_api.request import CompletionRequest
from chatsite.openai_api.tools import ToolUse
from chatsite.pools.selectors import pool_for_tenant
from chatsite.pools.tokens import (TEMPLATE_TOKENS_PER_MESSAGE, TEMPLATE_TOKENS_PER_PROMPT, count_tokens,
                                    decode_tokens, pool_takes_tools)
from chatsite.quotas.services import refusals_counted
from chatsite.runs.models import GenerationRun
from chatsite.runs.selectors import run_choices, run_choices_admitted
from chatsite.runs.services import run_submit
from chatsite.tenancy.models import ApiKey

IDEMPOTENCY_FIELD = "Idempotency-Key"


@dataclass(frozen=True)
class Submitted:
    runs: list[GenerationRun]  # one per choice, in index order (pool and reply loaded)
    replayed: bool  # an earlier call's runs, found by its Idempotency-Key

    @property
    def run(self) -> GenerationRun:
        """The first choice's run: it names the completion."""
        return self.runs[0]


def completion_submit(*, key: ApiKey, request: CompletionRequest, idempotency_key: str = "") -> Submitted:
    """A new chat holding the request's earlier messages, and a queued run (source
    openai) for each of the request's n choices answering its last, user, message
    (sibling replies): the same admission, queue, worker and stream as every other
    run. One transaction: a refused request (bad model, sampling, content, a prompt
    that cannot fit, limits) writes nothing.

    With `idempotency_key`, a repeat of the tenant's earlier call with that key (the
    same body) gets the earlier runs and creates nothing, also when the two race.

    Raises Conflict (409, code idempotency_key_reused) when the key came with another
    body, and what chat_create_with_history and run_submit raise (ServiceError subclasses)."""
    if idempotency_key:
        earlier = _earlier(key, idempotency_key, request.digest)
        if earlier is not None:
            return Submitted(_replayed(earlier, idempotency_key, request), replayed=True)
    if request.tools is not None:
        refuse_tools_unless_template_has_them(key.tenant, request.model, request.tools)
    try:
        with refusals_counted(key.tenant), transaction.atomic():
            prompts = [(request.content, request.prompt_token_ids), *request.more_prompts]
            runs = []
            for i, (text, token_ids) in enumerate(prompts):  # a text completion's prompts: one run each, n choices
                runs += _submit_one(key, request, text, token_ids, prompt_key(idempotency_key, i))
            return Submitted(runs, replayed=False)
    except Conflict as exc:
        # A call with the same key committed first (run_submit sees its run in another chat).
        if exc.field != IDEMPOTENCY_FIELD or (earlier := _earlier(key, idempotency_key, request.digest)) is None:
            raise
        return Submitted(_replayed(earlier, idempotency_key, request), replayed=True)


def prompt_key(idempotency_key: str, i: int) -> str:
    """The idempotency key of a text completion's prompt `i`: the call's for the first,
    and one derived from it for the others, so a repeat finds every prompt's runs."""
    return idempotency_key if not idempotency_key or i == 0 else f"{idempotency_key[:180]}#prompt{i}"


def _replayed(earlier: GenerationRun, idempotency_key: str, request: CompletionRequest) -> list[GenerationRun]:
    runs = run_choices(earlier)
    for i in range(1, 1 + len(request.more_prompts)):
        head = GenerationRun.objects.filter(tenant_id=earlier.tenant_id,
                                            idempotency_key=prompt_key(idempotency_key, i)).first()
        runs += run_choices(head) if head is not None else []
    return runs


def _submit_one(key: ApiKey, request: CompletionRequest, text: str | None, token_ids: list | None,
                idempotency_key: str) -> list[GenerationRun]:
    """One prompt's chat and its n runs, inside the call's transaction."""
    chat = chat_create_with_history(tenant=key.tenant, owner=key.user, model=request.model, history=request.history)
    sampling = request.sampling
    if token_ids is not None:  # the message keeps the prompt's text as the pool's tokenizer reads it
        sampling = {**sampling, "prompt_token_ids": token_ids}
        text = decode_tokens(chat.pool.model, token_ids) or f"[a prompt of {len(token_ids)} token ids]"
    run = run_submit(chat=chat, content=text, source=GenerationRun.Source.OPENAI, idempotency_key=idempotency_key,
                     raw_prompt=request.raw_prompt, choices=request.n, tool_call_id=request.tool_call_id,
                     role=request.role, **sampling)
    _refuse_if_trimmed(run, request)
    if request.tool_use is not None:
        tool_use_attach(run=run, tool_use=request.tool_use)
    if idempotency_key:
        GenerationRun.objects.filter(pk=run.pk).update(request_digest=request.digest)
        run.request_digest = request.digest
    return run_choices_admitted(run)


def _refuse_if_trimmed(run: GenerationRun, request: CompletionRequest) -> None:
    """An OpenAI client sent the whole conversation and expects all of it to reach the
    model: where admission had to drop older messages to fit the context (as the web
    chat does), refuse instead. Replies with no text are never in a prompt."""
    sent = 1 + sum(1 for m in request.history if m["content"] or m["role"] != "assistant" or m.get("tool_calls"))
    if len(run.prompt_snapshot) < sent:
        raise InvalidInput(
            f"the messages do not fit model {run.pool.name!r}: its context of {run.pool.context_length} tokens, "
            f"with room kept for a reply of up to {run.max_tokens} tokens, holds only the newest "
            f"{len(run.prompt_snapshot)} of your {sent} messages; shorten them or ask for fewer max_tokens",
            field="messages", code="context_length_exceeded")


def _earlier(key: ApiKey, idempotency_key: str, digest: str) -> GenerationRun | None:
    if len(idempotency_key) > 200:
        raise InvalidInput("the Idempotency-Key header must be at most 200 characters", field=IDEMPOTENCY_FIELD)
    run = GenerationRun.objects.filter(tenant=key.tenant, idempotency_key=idempotency_key).first()
    if run is not None and (run.source != GenerationRun.Source.OPENAI or run.request_digest != digest):
        raise Conflict("this Idempotency-Key was already used with a different request; send a new key for a "
                       "new request", field=IDEMPOTENCY_FIELD, code="idempotency_key_reused")
    return run


def refuse_tools_unless_template_has_them(tenant, model: str, param: str) -> None:
    """Tools reach the model only through its chat template: refuse them, naming the
    parameter and the pool, when the pool's template does not read `tools`."""
    pool = pool_for_tenant(tenant, model)
    if not pool_takes_tools(pool):
        raise InvalidInput(f"{param}: the chat template of model {pool.name!r} has no tools, so it cannot call "
                           "functions; leave tools, tool_choice and tool messages out, or use a model whose "
                           "template has them", field=param)


def tool_use_attach(*, run: GenerationRun, tool_use: ToolUse) -> None:
    """Give a just-admitted run (not yet dispatched: that waits for the commit) its tools:
    the worker renders them into the prompt, and a reply that must call a function is
    constrained to the call's JSON (vLLM structured outputs); with `auto` and the run's
    own response_format, to that format's content or calls. Raises InvalidInput
    (field tools, code context_length_exceeded) when the definitions with the messages
    leave no room for the reply: the caller's transaction then writes nothing."""
    _refuse_if_tools_overflow(run, tool_use)
    content_format = run.sampling.get("response_format")  # the call's own, cleaned by admission
    sampling = {**run.sampling, "tools": tool_use.as_run_tools(content_format=content_format)}
    constraint = tool_use.constraint(content_format)
    if constraint is not None:
        sampling["response_format"] = constraint
    GenerationRun.objects.filter(pk=run.pk).update(sampling=sampling)
    run.sampling = sampling


def _refuse_if_tools_overflow(run: GenerationRun, tool_use: ToolUse) -> None:
    """Admission's estimate of the prompt counts the messages; the tool definitions go
    into the prompt too (the worker re-checks with the real template)."""
    pool = run.pool
    room = pool.context_length - run.max_tokens - TEMPLATE_TOKENS_PER_PROMPT
    used = sum(count_tokens(pool.model, m["content"] + (json.dumps(m["tool_calls"]) if m.get("tool_calls") else ""))
               + TEMPLATE_TOKENS_PER_MESSAGE for m in run.prompt_snapshot)
    tools = count_tokens(pool.model, json.dumps(tool_use.definitions))
    if used + tools > room:
        raise InvalidInput(
            f"the tools take about {tools} tokens: with the messages they do not fit model {pool.name!r}, whose "
            f"context of {pool.context_length} tokens keeps room for a reply of up to {run.max_tokens} tokens; "
            "send fewer or shorter tool definitions, or ask for fewer max_tokens", field="tools",
            code="context_length_exceeded")
