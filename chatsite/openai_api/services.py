"""Writes for the OpenAI-compatible API: one completion call becomes one run."""
from django.db import transaction

from chatsite.chats.services import chat_create_with_history
from chatsite.errors import InvalidInput
from chatsite.openai_api.request import CompletionRequest
from chatsite.pools.selectors import pool_for_tenant
from chatsite.pools.tokens import chat_template_has_tools
from chatsite.runs.models import GenerationRun
from chatsite.runs.services import run_submit
from chatsite.tenancy.models import ApiKey


def completion_submit(*, key: ApiKey, request: CompletionRequest) -> GenerationRun:
    """A new chat holding the request's earlier messages, and a queued run (source
    openai) answering its last, user, message: the same admission, queue, worker
    and stream as every other run. One transaction: a refused request (bad model,
    sampling, content, a prompt that cannot fit, limits) writes nothing.

    Raises what chat_create_with_history and run_submit raise (ServiceError subclasses)."""
    if request.tools is not None:
        _refuse_tools(key.tenant, request.model, request.tools)
    with transaction.atomic():
        chat = chat_create_with_history(tenant=key.tenant, owner=key.user, model=request.model,
                                        history=request.history)
        return run_submit(chat=chat, content=request.content, source=GenerationRun.Source.OPENAI,
                          **request.sampling)


def _refuse_tools(tenant, model: str, param: str) -> None:
    """Tool calling is not implemented: say why, naming the pool's chat template
    when it has no tools (SmolLM2's has none), so the client knows which to change."""
    pool = pool_for_tenant(tenant, model)
    if not chat_template_has_tools(pool.model):
        raise InvalidInput(f"{param}: the chat template of model {pool.name!r} has no tools, so it cannot call "
                           "functions; leave tools and tool_choice out", field=param)
    raise InvalidInput(f"{param}: tool calling is not supported by this server yet; leave tools and tool_choice "
                       "out", field=param)
