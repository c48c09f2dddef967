"""Documentation-only view of GET /api/runs/{id}/events.

The endpoint is the plain ASGI app chatsite.runs.events_app.run_events,
routed in chatsite/edge/asgi.py before Django; this view only carries its OpenAPI
description (added by chatsite.api.schema_hook.add_documented_endpoints) and is never
routed."""
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.views import APIView

from chatsite.api.openapi import errors
from chatsite.runs.stream import codec

EVENTS_DESCRIPTION = """
The reply of a run as [Server-Sent Events](https://html.spec.whatwg.org/multipage/server-sent-events.html)
(`Content-Type: text/event-stream`). Replays from the start (or from `Last-Event-ID`), follows the
run live, and closes after the terminal event. Reading never starts, repeats or cancels a generation;
several readers may follow one run at once.

| event | data (JSON) | |
|---|---|---|
| `token` | `{"seq": 0, "n": 1, "text": "The"}` | `n` tokens starting at token index `seq`; append `text` |
| `done` | `{"finish_reason": "stop", "usage": {"prompt_tokens": 12, "completion_tokens": 40}}` | last event. `finish_reason`: `stop`, `length`, `budget` or `cancelled` |
| `error` | `{"code": "engine_error", "message": "..."}` | last event: the run failed; the text so far is kept |
| `snapshot` | `{"text": "...", "n": 40}` | the reply's first `n` tokens, which replace what was shown: a finished run whose stream expired (then `done` or `error`), or a resume from an id the stream no longer holds |

Every `token`, `done` and `error` event carries `id:` (the stream entry id, like `1700000000000-0`).
To resume after a dropped connection, send it back as the `Last-Event-ID` header (browsers' EventSource
do this themselves) or as `?last_event_id=`: the stream continues after it, with nothing lost or
repeated. If the stream no longer holds that id (its entries were lost, e.g. with a restart of its
store, and the reply is being written again), a `snapshot` of the reply so far comes first, with the
`id:` of its last token when it has one, and replaces your text; the rest follows it. A `retry: 1000` line comes first; a `: keep-alive` comment line every ~15 s while the model is quiet.

Errors are JSON in the API's one error shape: 400 `invalid_last_event_id` for a malformed
`Last-Event-ID`; 401 without valid credentials; 404 for a run that is not yours (or another tenant's);
405 for any method but GET; 429 `too_many_streams` (with `Retry-After`) when you already hold the most
event streams one user may hold open at once.

A stream ends early, without a terminal event, when the access it was opened with ends: the API key is
revoked, the session signs out, your membership of the tenant is removed, or the chat is deleted.
Reconnecting then answers 401 or 404.
"""

STREAM_EXAMPLE = (
    "retry: 1000\n\n"
    "id: 1700000000000-0\nevent: token\ndata: {\"seq\": 0, \"n\": 1, \"text\": \"The\"}\n\n"
    "id: 1700000000012-0\nevent: token\ndata: {\"seq\": 1, \"n\": 1, \"text\": \" loop\"}\n\n"
    "id: 1700000000030-0\nevent: done\n"
    "data: {\"finish_reason\": \"stop\", \"usage\": {\"prompt_tokens\": 12, \"completion_tokens\": 2}}\n\n"
)


# OpenAPI 3.0 has no way to describe a stream as a whole: the schema of an
# event-stream response describes one event, as an SSE parser reads it.
RUN_EVENT_SCHEMA = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "enum": ["token", "done", "error", "snapshot"]},
        "data": {"type": "string", "description": "A JSON object; its fields depend on `event` (see above)."},
        "id": {"type": "string", "pattern": codec.STREAM_ID_PATTERN,
               "description": "The stream entry id; send it back as Last-Event-ID to resume."},
        "retry": {"type": "integer", "description": "Reconnect delay in milliseconds."},
    },
}


class RunEventsDocs(APIView):
    @extend_schema(
        operation_id="runs_events",
        summary="Stream a run's reply (Server-Sent Events)",
        description=EVENTS_DESCRIPTION,
        tags=["runs"],
        parameters=[
            OpenApiParameter("run_id", int, OpenApiParameter.PATH),
            OpenApiParameter("Last-Event-ID", {"type": "string", "pattern": codec.STREAM_ID_PATTERN},
                             OpenApiParameter.HEADER, description="Resume after this event id."),
            OpenApiParameter("last_event_id", {"type": "string", "pattern": codec.STREAM_ID_PATTERN},
                             description="The same as the Last-Event-ID header, for clients that cannot "
                                         "set headers; the header wins when both are sent."),
            OpenApiParameter("token", str, description="The token in the run's `events_url`: reads this run "
                                                       "without other credentials until it expires, or its key, "
                                                       "session or membership is revoked."),
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                RUN_EVENT_SCHEMA, description="The event stream (see the table above); the schema is one event's.",
                examples=[OpenApiExample("A short reply", value=STREAM_EXAMPLE, media_type="text/event-stream")]),
            **errors(400, 401, 404, 405, 429, 500, 503),
        },
    )
    def get(self, request, run_id: int):  # pragma: no cover - never routed
        raise NotImplementedError("served by chatsite.runs.events_app.run_events")
