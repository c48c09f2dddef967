"""POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /v1/models/{model}.

Async views: the database is reached through short thread hops, the model's
output through the run stream's one follower (chatsite.runs.stream.follow), so no thread
waits for the model. A streaming client that hangs up stops only its own
reading: the run goes on and is saved (it is not a cancel). A call for n choices
has a run for each, read together (chatsite.runs.stream.follow_all).
"""
import functools
import logging
from contextlib import aclosing
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from chatsite import stage_trace
from chatsite.edge.sse import SseResponse
from chatsite.errors import REQUEST_ID_HEADER, UNAVAILABLE, ServiceError, openai_error_body, request_id
from chatsite.openai_api import ratelimit
from chatsite.openai_api.auth import (CHALLENGE, REVOKED_MESSAGE, authenticate, authenticate_sync, json_body, key_grant,
                                     require_method)
from chatsite.openai_api.completions import wire
from chatsite.openai_api.completions.extras import Extras
from chatsite.openai_api.completions.request import (CompletionRequest, parse_completion_request,
                                                    parse_text_completion_request)
from chatsite.openai_api.completions.services import completion_submit
from chatsite.openai_api.completions.stream import CompletionStream
from chatsite.openai_api.errors import OpenAIError, error_response, from_service_error
from chatsite.openai_api.tools import wire as tools_wire
from chatsite.pools.selectors import pools_for_tenant
from chatsite.quotas.selectors import quota_allowances
from chatsite.runs.models import GenerationRun
from chatsite.runs.outlet import Outlet, closing_after
from chatsite.runs.schema_limits import CONSTRAINT_REFUSED
from chatsite.runs.selectors import run_choices
from chatsite.runs.services import run_finalize
from chatsite.runs.stream import codec

log = logging.getLogger(__name__)

# Errors a run can end with that are the request's fault, not the server's.
CLIENT_RUN_ERRORS = {"context_length_exceeded": 400, CONSTRAINT_REFUSED: 400, codec.REFUSED_CODE: 400}


def openai_view(view):
    """CSRF-exempt (bearer keys only), and Postgres or Redis being briefly away is a
    503 with Retry-After in OpenAI's shape, as the REST API answers. Every answer
    carries an `x-request-id`."""

    @functools.wraps(view)
    async def wrapper(request, *args, **kwargs):
        try:
            response = await view(request, *args, **kwargs)
        except UNAVAILABLE as exc:
            log.warning("%s: backing store unavailable: %s", request.path, exc)
            response = error_response(503, "service_unavailable", "the service is briefly unavailable; try again "
                                      "in a few seconds", headers={"Retry-After": "5"})
        response[REQUEST_ID_HEADER] = request_id()
        return response

    return csrf_exempt(wrapper)


@dataclass
class Admitted:
    """What a completion call's one thread hop brings back: the answer to send at once
    (`refused`), or the runs to follow through `outlet`; and the tenant's rate-limit
    headers, read after the call's own admission (so they count it)."""
    refused: object = None
    req: CompletionRequest | None = None
    runs: list = field(default_factory=list)
    replayed: bool = False
    outlet: Outlet | None = None
    limits: dict = field(default_factory=dict)


def _admit(request, parse) -> Admitted:
    """The key, the request, its stream's slot, its runs, and the rate-limit headers, in
    one thread hop (each sync_to_async costs the event loop's thread a hop there and back)."""
    try:
        require_method(request, "POST")
        key = authenticate_sync(request)
    except OpenAIError as exc:
        return Admitted(refused=error_response(exc.status, exc.code, exc.message, exc.param, exc.headers))
    out = Admitted()
    try:
        out.req = parse(json_body(request))
        # A stream's slot is taken before its runs are admitted: a stream refused admits nothing.
        out.outlet = Outlet.open_sync(key_grant(key)) if out.req.stream else None
        submitted = completion_submit(key=key, request=out.req,
                                      idempotency_key=request.headers.get("Idempotency-Key", ""))
        out.runs, out.replayed = submitted.runs, submitted.replayed
        grant = key_grant(key, out.runs[0])
        if out.outlet is None:
            out.outlet = Outlet.watch(grant)
        else:
            out.outlet.regrant(grant)
    except OpenAIError as exc:
        out.refused = error_response(exc.status, exc.code, exc.message, exc.param, exc.headers)
    except ServiceError as exc:
        out.refused = _service_error(exc, out.req)
    except BaseException:
        if out.outlet is not None:
            out.outlet.close_sync()
        raise
    if out.refused is not None and out.outlet is not None:
        out.outlet.close_sync()
    out.limits = ratelimit.headers(quota_allowances(key.tenant, key.limits.quota))
    return out


def _finalized(runs: list[GenerationRun]) -> list[GenerationRun]:
    for run in runs:
        run_finalize(run_id=run.pk)  # idempotent: the worker usually got there first
    return [choice for head in runs if head.choice_index == 0 for choice in run_choices(head)]  # each prompt's


def _run_error(run: GenerationRun, entry: codec.Entry) -> tuple[int, dict]:
    status = CLIENT_RUN_ERRORS.get(entry.code, 500)
    message = f"{entry.message or entry.code} (run {run.pk})"
    return status, openai_error_body(status, entry.code, message, run_error_param(run, entry.code))


def run_error_param(run: GenerationRun, code: str) -> str | None:
    """The parameter a run's error names: the constraint the engine refused came from
    the tools (a call's schema) or the response_format."""
    if code != CONSTRAINT_REFUSED:
        return None
    return "tools" if (run.sampling or {}).get("tools") else "response_format"


def _service_error(exc: ServiceError, req: CompletionRequest | None):
    if req is not None and exc.field == "content":  # run_submit names the last message's text "content"
        exc.field = "prompt" if req.raw_prompt else f"messages[{len(req.history)}].content"
    return from_service_error(exc)


async def _authenticated(request, method: str):
    """The request's API key, or the error response to send instead."""
    try:
        require_method(request, method)
        return await authenticate(request), None
    except OpenAIError as exc:
        return None, error_response(exc.status, exc.code, exc.message, exc.param, exc.headers)


@openai_view
async def chat_completions(request):
    return await _completion(request, parse_completion_request, wire.CHAT)


@openai_view
async def text_completions(request):
    return await _completion(request, parse_text_completion_request, wire.TEXT)


async def _completion(request, parse, shape: wire.ChatShape):
    """Authenticate and admit (one thread hop), then answer the completion; the tenant's
    rate-limit headers on every answer but a 401 or a 405 (no key read yet)."""
    stage_trace.mark("web.request")
    admitted = await sync_to_async(_admit)(request, parse)
    response = admitted.refused or await _answer(admitted, shape)
    for name, value in admitted.limits.items():
        response[name] = value
    return response


async def _answer(admitted: Admitted, shape: wire.ChatShape):
    req, runs, replayed, outlet = admitted.req, admitted.runs, admitted.replayed, admitted.outlet
    shape = tools_wire.shape_for(runs[0], shape)  # a run with tools (one choice) reads its reply as calls
    # A replayed run may be older than its stream's TTL: follow() then reads it from Postgres.
    if req.stream:
        response = SseResponse(closing_after(outlet, _stream(outlet, runs, req, shape, fresh=not replayed)))
    else:
        response = await _wait(outlet, runs, shape, fresh=not replayed)
    response["X-Run-Id"] = str(runs[0].pk)
    if len(runs) > 1:
        response["X-Run-Ids"] = ",".join(str(run.pk) for run in runs)  # one per choice, in index order
    if replayed:
        response["Idempotent-Replayed"] = "true"
    return response


async def _wait(outlet: Outlet, runs: list[GenerationRun], shape: wire.ChatShape, *, fresh: bool) -> JsonResponse:
    """Wait for every choice's terminal entry, then answer with the saved replies; a
    choice that failed makes the answer its error, as with one choice."""
    terminals = {}
    async with aclosing(outlet.runs([run.pk for run in runs], fresh=fresh)) as items:
        async for item in items:
            if item is not None and item[1] and item[1][-1].is_terminal:
                terminals[item[0]] = item[1][-1]
    if outlet.revoked:
        return error_response(401, "invalid_api_key", REVOKED_MESSAGE, headers=CHALLENGE)
    for i, run in enumerate(runs):
        if terminals[i].type == codec.ERROR:
            status, body = _run_error(run, terminals[i])
            return JsonResponse(body, status=status)
    saved = await sync_to_async(_finalized)(runs)
    return JsonResponse(Extras(saved, text=isinstance(shape, wire.TextShape)).whole(shape.whole(saved)))


async def _stream(outlet: Outlet, runs: list[GenerationRun], req: CompletionRequest, shape: wire.ChatShape, *,
                  fresh: bool):
    """Chunk events in the endpoint's shape, the choices' chunks interleaved as they come,
    then `data: [DONE]` (in the last chunks' write: one send fewer); the usage chunk after
    the last choice has finished. A choice's error ends the stream (as an SDK stops at the
    first), and so does the key's revocation (an error chunk says so)."""
    run = runs[0]  # it names the completion
    chunks = CompletionStream(runs, shape, req.include_usage, n=req.n)
    if opening := b"".join(wire.sse_data(p) for p in chunks.opening()):
        yield opening  # at once, with the response's headers (daphne sends them with the first write)
    try:
        async with aclosing(outlet.runs([r.pk for r in runs], fresh=fresh)) as items:
            async for item in items:
                if item is None:
                    yield wire.SSE_KEEPALIVE
                    continue
                index, batch = item
                out, failed = [], False
                for entry in batch:
                    if entry.type in (codec.TOKEN, codec.SNAPSHOT):
                        out.extend(wire.sse_data(p) for p in chunks.token(index, entry))
                    elif entry.type == codec.DONE:
                        out.extend(wire.sse_data(p) for p in chunks.done(index, entry))
                    else:
                        out.append(wire.sse_data(_run_error(runs[index], entry)[1]))
                        failed = True
                if failed or not chunks.open:  # the end, said in the same write as the last chunks
                    out.append(wire.SSE_DONE)
                    yield b"".join(out)
                    return
                yield b"".join(out)
    except Exception:  # Redis gone mid-stream: say so in the stream, then end it
        log.exception("run %s: streaming to an OpenAI client failed", run.pk)
        yield wire.sse_data(openai_error_body(500, "stream_failed", f"reading the reply failed; the run goes on "
                                              f"and is saved: GET /api/runs/{run.pk}/ has it"))
    if outlet.revoked:
        yield wire.sse_data(openai_error_body(401, "invalid_api_key", REVOKED_MESSAGE))
    yield wire.SSE_DONE


def _models(key, name: str | None = None) -> list:
    pools = list(pools_for_tenant(key.tenant, key.limits.allowed_pool_ids))  # a handful, compared here
    return pools if name is None else [p for p in pools if p.name == name]


@openai_view
async def models_list(request):
    key, refused = await _authenticated(request, "GET")
    if refused is not None:
        return refused
    response = JsonResponse(wire.model_list(await sync_to_async(_models)(key)))
    return await ratelimit.add_headers(response, key)


@openai_view
async def model_detail(request, model: str):
    key, refused = await _authenticated(request, "GET")
    if refused is not None:
        return refused
    found = await sync_to_async(_models)(key, model)
    if not found:
        response = error_response(404, "model_not_found", f"The model '{model[:60]}' does not exist or you do "
                                  "not have access to it; GET /v1/models lists yours.", "model")
    else:
        response = JsonResponse(wire.model_object(found[0]))
    return await ratelimit.add_headers(response, key)
