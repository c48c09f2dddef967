"""GET /events: the signed-in user's events as Server-Sent Events, so every window
they have open follows what the others do (a chat created, renamed or deleted, a
message sent or a reply started, another version chosen) without polling.

Follows the user's Redis stream (chatsite.chats.live) from `?after=` (the id the
page was rendered at) or the Last-Event-ID the browser sends on reconnecting;
only the events of the tenant the session acts for. A comment line every ~15 s
keeps proxies from closing the connection."""
import json
import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import JsonResponse

from chatsite.chats import live
from chatsite.errors import NotFound, ServiceError
from chatsite.runs import sse
from chatsite.runs.outlet import Outlet, closing_after
from chatsite.runs.stream import codec
from chatsite.edge.sse import SseResponse
from chatsite.tenancy.revocation import Grant, session_credential
from chatsite.tenancy.selectors import tenant_for_request


def _error(status: int, code: str, message: str, retry_after: int | None = None) -> JsonResponse:
    response = JsonResponse({"error": {"code": code, "message": message}}, status=status)
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


async def _frames(user_id: int, tenant_id: int, last_id: str, outlet: Outlet):
    yield b"retry: 2000\n\n"
    async for batch in outlet.user_events(user_id, last_id, settings.CHATSITE["SSE_KEEPALIVE_SECONDS"]):
        if not batch:
            yield sse.KEEPALIVE
            continue
        frames = [f"id: {entry_id}\nevent: {event['type']}\ndata: {json.dumps(event)}\n\n"
                  for entry_id, event in batch if event.get("tenant") == tenant_id]
        if frames:
            yield "".join(frames).encode()


async def user_events(request):
    if request.method != "GET":
        return _error(405, "method_not_allowed", "use GET to follow your events")
    user = await request.auser()
    if not user.is_authenticated:
        return _error(401, "not_authenticated", "sign in to follow your events")
    try:
        tenant = await sync_to_async(tenant_for_request)(user, None)
    except NotFound as exc:
        return _error(403, "no_tenant", exc.message)
    last_id = request.headers.get("Last-Event-ID") or request.GET.get("after") or ""
    if not last_id:
        last_id = await sync_to_async(live.latest_id)(user.pk)
    if not codec.is_valid_stream_id(last_id):
        return _error(400, "invalid_last_event_id", "after must be an event id, like 1700000000000-0")
    # Through the one way out, as a run's events: one slot of the user's open streams, ended
    # within a few seconds of a sign-out, a password change or losing the membership.
    grant = Grant(run_id=0, chat_id=0, tenant_id=tenant.pk, user_id=user.pk,
                  credential=session_credential(request.session.session_key), since=time.time())
    try:
        outlet = await Outlet.open(grant)
    except ServiceError as exc:
        return _error(exc.status, exc.code, exc.message, retry_after=exc.retry_after)
    return SseResponse(closing_after(outlet, _frames(user.pk, tenant.pk, last_id, outlet)))
