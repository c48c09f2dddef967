"""POST /v1/responses, GET and DELETE /v1/responses/{id}, POST /v1/responses/{id}/cancel.

As the chat completion views: async, the database through short thread hops, the
run's output through the run stream's one follower. A response is a run, so it goes
on without its client (a dropped stream, `background: true`) and is saved; a
stream is resumed with GET ?stream=true&starting_after=N (responses_events numbers
the events). Errors use OpenAI's shape, the parameter at fault named.
"""
import asyncio
import logging
from contextlib import aclosing

from asgiref.sync import sync_to_async
from django.http import JsonResponse

from chatsite.edge.sse import SseResponse
from chatsite.errors import ServiceError
from chatsite.openai_api.auth import CHALLENGE, REVOKED_MESSAGE, authenticate, json_body, key_grant, require_method
from chatsite.openai_api.completions import logprobs as logprobs_wire
from chatsite.openai_api.completions.views import CLIENT_RUN_ERRORS, openai_view
from chatsite.openai_api.errors import OpenAIError, error_response, from_service_error
from chatsite.openai_api.responses import services
from chatsite.openai_api.responses import wire
from chatsite.openai_api.responses.events import MAX_SEQUENCE, events_for
from chatsite.openai_api.responses.request import LOGPROBS_INCLUDE, ResponseRequest, parse_response_request
from chatsite.openai_api.responses.selectors import response_get, response_input
from chatsite.runs.models import GenerationRun
from chatsite.runs.outlet import Outlet, closing_after
from chatsite.runs.services import run_finalize
from chatsite.runs.services.finalize import run_finalize_if_ended
from chatsite.runs.stream import log as stream_log
from chatsite.runs.stream.finished import finished_entries
from chatsite.runs.stream.follow import follow

log = logging.getLogger(__name__)

CANCEL_WAIT_SECONDS = 5.0  # a running run's worker stops at its next engine step
INPUT_PAGE, MAX_INPUT_PAGE = 20, 100  # input items per page: OpenAI's default and limit
# What admission and the chat services call a parameter, and what this endpoint calls it.
PARAMS = {"max_tokens": "max_output_tokens", "system_prompt": "instructions", "messages": "input"}


def _param(field: str | None, req: ResponseRequest | None) -> str | None:
    if field is None or req is None:
        return field
    if field == "content":  # run_submit's name for the text it answers: the last input item
        return f"input[{len(req.history)}].content"
    if field.startswith("messages["):  # the input items before the last, as history
        return "input" + field.removeprefix("messages")
    return PARAMS.get(field, field)


def _service_error(exc: ServiceError, req: ResponseRequest | None = None) -> JsonResponse:
    exc.field = _param(exc.field, req)
    return from_service_error(exc)


def _load(run_id: int) -> GenerationRun:
    return GenerationRun.objects.select_related("pool", "assistant_message", "response_record").get(pk=run_id)


def _object(run: GenerationRun) -> dict:
    """The response object as the run stands: from Postgres, and for a running run
    its text so far from the run stream (output then holds the message in_progress). A run
    whose stream has ended but whose worker has not saved it yet is saved first, as the door
    does: a client that read the stream's end retrieves the response completed."""
    if not run.is_terminal and run_finalize_if_ended(run_id=run.pk):
        run = _load(run.pk)
    base = wire.echo(run, run.response_record)
    if run.status == GenerationRun.Status.QUEUED:
        return wire.pending_object(base, "queued")
    if not run.is_terminal:
        so_far = stream_log.read(run.pk)
        output = wire.output_items(base, run.pk, "in_progress", so_far.text, so_far.logprobs,
                                   final=False) if so_far.text else []
        return wire.response_object(base, status="in_progress", output=output)
    snapshot, terminal = finished_entries(run.pk)
    return wire.finished_object(base, run.pk, text=snapshot.text, output_tokens=snapshot.n, terminal=terminal,
                                logprobs=snapshot.logprobs)


def _create(key, req: ResponseRequest, idempotency_key: str) -> tuple[GenerationRun, bool, Outlet | None]:
    """The response's run, whether this call made it, and the outlet its answer is read
    through (a stream's slot is taken before the run is admitted: a refused stream admits
    nothing; a background response is read by nobody now)."""
    outlet = Outlet.open_sync(key_grant(key)) if req.stream else None
    try:
        run, created = services.response_create(key=key, request=req, idempotency_key=idempotency_key)
        run = _load(run.pk)
    except BaseException:
        if outlet is not None:
            outlet.close_sync()
        raise
    if outlet is not None:
        outlet.regrant(key_grant(key, run))
    elif not req.background:
        outlet = Outlet.watch(key_grant(key, run))
    return run, created, outlet


def _finalized_object(run_id: int) -> dict:
    run_finalize(run_id=run_id)  # idempotent: the worker usually got there first
    run = _load(run_id)
    body = _object(run)
    if not run.response_record.stored:  # its text, now answered
        services.response_forget(run_id=run_id)
    return body


def _forget(run_id: int) -> None:
    """An unstored response's text, once its stream has told its end (saved first)."""
    run_finalize(run_id=run_id)
    services.response_forget(run_id=run_id)


def _streaming(outlet: Outlet, events, run: GenerationRun) -> SseResponse:
    return SseResponse(closing_after(outlet, events), X_Run_Id=str(run.pk))


def _json(body: dict, run: GenerationRun) -> JsonResponse:
    response = JsonResponse(body)
    response["X-Run-Id"] = str(run.pk)
    return response


@openai_view
async def responses(request):
    req = None
    try:
        require_method(request, "POST")
        key = await authenticate(request)
        req = parse_response_request(json_body(request))
        run, created, outlet = await sync_to_async(_create)(key, req, request.headers.get("Idempotency-Key", ""))
    except OpenAIError as exc:
        return error_response(exc.status, exc.code, exc.message, exc.param, exc.headers)
    except ServiceError as exc:
        return _service_error(exc, req)
    base = wire.echo(run, run.response_record)
    if req.stream:  # a retry with the same Idempotency-Key gets the same events, from the start
        return _streaming(outlet, _events(outlet, run, base, after=-1, fresh=created), run)
    if req.background:
        return _json(wire.pending_object(base, "queued") if created else await sync_to_async(_object)(run), run)
    return await _wait(outlet, run, fresh=created)


async def _wait(outlet: Outlet, run: GenerationRun, *, fresh: bool) -> JsonResponse:
    """Wait for the run's end; a run that failed through the request's fault is a 4xx."""
    terminal = None
    async with aclosing(outlet.run(run.pk, fresh=fresh)) as batches:
        async for batch in batches:
            if batch and batch[-1].is_terminal:
                terminal = batch[-1]
    if outlet.revoked:
        return error_response(401, "invalid_api_key", REVOKED_MESSAGE, headers=CHALLENGE)
    body = await sync_to_async(_finalized_object)(run.pk)
    if body["status"] == "failed" and terminal is not None and terminal.code in CLIENT_RUN_ERRORS:
        return error_response(CLIENT_RUN_ERRORS[terminal.code], terminal.code,
                              f"{terminal.message or terminal.code} ({body['id']})")
    return _json(body, run)


async def _events(outlet: Outlet, run: GenerationRun, base: dict, *, after: int, fresh: bool):
    """The response's events numbered after `after`, then the end of the response (or an
    error event, when the key is revoked meanwhile)."""
    run_id = run.pk
    events = events_for(base, run_id, logprobs=logprobs_wire.asked(run))
    if opening := [data for n, data in events.opening() if n > after]:
        yield b"".join(opening)
    try:
        async with aclosing(outlet.run(run_id, fresh=fresh)) as batches:
            async for batch in batches:
                if batch is None:
                    yield wire.SSE_KEEPALIVE
                    continue
                fed = [event for entry in batch for event in events.feed(entry)]
                if not events.holds(after):  # the client's events were of a lost life of the stream
                    yield events.restarted()
                    return
                if out := [data for n, data in fed if n > after]:
                    yield b"".join(out)
        if not base["store"]:
            await sync_to_async(_forget)(run_id)
    except Exception:  # Redis gone mid-stream: say so in the stream, then end it
        log.exception("response %s: streaming failed", run_id)
        yield events.broken(f"reading the reply failed; the response goes on and is saved: "
                            f"GET /v1/responses/{wire.response_id(run_id)} has it")
    if outlet.revoked:
        yield events.broken(REVOKED_MESSAGE, code="invalid_api_key")


def _query(request) -> tuple[bool, int]:
    """GET's `stream` and `starting_after`, or OpenAIError 400 naming the one at fault."""
    stream = request.GET.get("stream", "false").lower()
    if stream not in ("true", "false"):
        raise OpenAIError(400, "invalid_request", "stream must be true or false", "stream")
    after = request.GET.get("starting_after")
    if after is None:
        return stream == "true", -1
    if stream != "true":
        raise OpenAIError(400, "invalid_request", "starting_after is only allowed with stream=true",
                          "starting_after")
    if not (after.isascii() and after.isdigit()) or int(after) > MAX_SEQUENCE:
        raise OpenAIError(400, "invalid_request", "starting_after must be a sequence number (an integer, 0 or "
                          "more): the last event you had", "starting_after")
    return True, int(after)


def _found(key, response_id: str) -> GenerationRun:
    return _load(response_get(key=key.key, response_id=response_id).pk)


@openai_view
async def response_detail(request, response_id: str):
    try:
        require_method(request, "GET", "DELETE")
        key = await authenticate(request)
        stream, after = _query(request) if request.method == "GET" else (False, -1)
        run = await sync_to_async(_found)(key, response_id)
        if request.method == "DELETE":
            await sync_to_async(services.response_delete)(run=run)
            return JsonResponse({"id": wire.response_id(run.pk), "object": "response.deleted", "deleted": True})
    except OpenAIError as exc:
        return error_response(exc.status, exc.code, exc.message, exc.param, exc.headers)
    except ServiceError as exc:
        return _service_error(exc)
    if stream:
        try:
            outlet = await Outlet.open(key_grant(key, run))
        except ServiceError as exc:
            return _service_error(exc)
        return _streaming(outlet, _events(outlet, run, wire.echo(run, run.response_record), after=after,
                                          fresh=False), run)
    return _json(await sync_to_async(_object)(run), run)


async def _until_terminal(run_id: int) -> None:
    async for batch in follow(run_id):
        if batch and batch[-1].is_terminal:
            return


@openai_view
async def response_cancel(request, response_id: str):
    try:
        require_method(request, "POST")
        key = await authenticate(request)
        run = await sync_to_async(_found)(key, response_id)
        await sync_to_async(services.response_cancel)(run=run)
    except OpenAIError as exc:
        return error_response(exc.status, exc.code, exc.message, exc.param, exc.headers)
    except ServiceError as exc:
        return _service_error(exc)
    try:
        await asyncio.wait_for(_until_terminal(run.pk), CANCEL_WAIT_SECONDS)
    except TimeoutError:
        pass  # the worker has not stopped yet: the object says in_progress, and a GET will say cancelled
    return _json(await sync_to_async(_finalized_object)(run.pk), run)


@openai_view
async def response_input_items(request, response_id: str):
    try:
        require_method(request, "GET")
        key = await authenticate(request)
        after, limit, descending = _page(request)
        items = await sync_to_async(_input_items)(key, response_id)
    except OpenAIError as exc:
        return error_response(exc.status, exc.code, exc.message, exc.param, exc.headers)
    except ServiceError as exc:
        return _service_error(exc)
    if descending:
        items.reverse()
    if after is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            return error_response(400, "invalid_request", f"after: no input item {after[:60]!r} in this response",
                                  "after")
        items = items[ids.index(after) + 1:]
    page = items[:limit]
    return JsonResponse({"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                         "last_id": page[-1]["id"] if page else None, "has_more": len(items) > limit})


def _input_items(key, response_id: str) -> list[dict]:
    run = response_get(key=key.key, response_id=response_id)
    return [item for message in response_input(run=run) for item in wire.input_items(message)]


def _page(request) -> tuple[str | None, int, bool]:
    """input_items' `after`, `limit` (1 to 100, 20 by default) and `order` (desc by
    default), or OpenAIError 400 naming the one at fault."""
    limit = request.GET.get("limit", str(INPUT_PAGE))
    if not limit.isdigit() or not 1 <= int(limit) <= MAX_INPUT_PAGE:
        raise OpenAIError(400, "invalid_request", f"limit must be an integer from 1 to {MAX_INPUT_PAGE}", "limit")
    order = request.GET.get("order", "desc")
    if order not in ("asc", "desc"):
        raise OpenAIError(400, "invalid_request", "order must be asc or desc", "order")
    for value in request.GET.getlist("include") + request.GET.getlist("include[]"):
        if value != LOGPROBS_INCLUDE:
            raise OpenAIError(400, "invalid_request", f"include: only \"{LOGPROBS_INCLUDE}\" is supported",
                              "include")
    return request.GET.get("after"), int(limit), order == "desc"
