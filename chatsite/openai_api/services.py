"""Writes for the OpenAI-compatible API: one completion call becomes one run."""
from django.db import transaction

from chatsite.chats.services import chat_create_with_history
from chatsite.openai_api.request import CompletionRequest
from chatsite.runs.models import GenerationRun
from chatsite.runs.services import run_submit
from chatsite.tenancy.models import ApiKey


def completion_submit(*, key: ApiKey, request: CompletionRequest) -> GenerationRun:
    """A new chat holding the request's earlier messages, and a queued run (source
    openai) answering its last, user, message: the same admission, queue, worker
    and stream as every other run. One transaction: a refused request (bad model,
    sampling, content, a prompt that cannot fit, limits) writes nothing.

    Raises what chat_create_with_history and run_submit raise (ServiceError subclasses)."""
    with transaction.atomic():
        chat = chat_create_with_history(tenant=key.tenant, owner=key.user, model=request.model,
                                        history=request.history)
        return run_submit(chat=chat, content=request.content, source=GenerationRun.Source.OPENAI,
                          **request.sampling)
