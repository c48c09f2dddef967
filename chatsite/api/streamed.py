"""A run's reply in the response of the request that started it (`"stream": true`).

A REST client reads a reply with a second request, GET `run.events_url`. With
`"stream": true` a message POST (and a chat's start with its first message) answers
200 `text/event-stream` instead: first `event: run` with the JSON the POST answers
otherwise (the run, with its events_url, and the turn's messages), then the run's
events exactly as GET .../events sends them (ids for Last-Event-ID, `done` or `error`
last). One request less per reply; a client that drops resumes with GET events_url
and the last id it had. The stream holds one of the user's stream slots and ends when
the user's access is revoked, as the GET does (chatsite.runs.events_app).
"""
from contextlib import aclosing

from django.conf import settings
from django.utils import timezone

from chatsite.errors import InvalidInput, ServiceError
from chatsite.runs import sse
from chatsite.runs.access import grant_of
from chatsite.runs.outlet import Outlet, closing_after
from chatsite.edge.sse import SseResponse


def wants_stream(data: dict) -> bool:
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise InvalidInput("stream must be true (the reply as Server-Sent Events in this response) or false",
                           field="stream")
    return stream


def streamed(request, run, answer: dict) -> SseResponse:
    """The response streaming `run`'s events after an `event: run` carrying `answer`."""
    # A run younger than the stream's TTL has its stream (an idempotent repeat may return an older one).
    fresh = (timezone.now() - run.queued_at).total_seconds() < settings.CHATSITE["STREAM_TTL_SECONDS"]
    return SseResponse(_body(grant_of(request, run), run.pk, answer, fresh), X_Run_Id=str(run.pk))


async def _body(grant, run_id: int, answer: dict, fresh: bool):
    yield sse.RETRY + sse.event("run", answer)
    try:
        outlet = await Outlet.open(grant)
    except ServiceError as exc:  # the run goes on: its events_url reads it once a slot is free
        yield sse.event("error", {"code": exc.code, "message": exc.message})
        return
    async with aclosing(closing_after(outlet, sse.body(run_id, after=None, fresh=fresh, outlet=outlet))) as chunks:
        async for chunk in chunks:
            yield chunk
