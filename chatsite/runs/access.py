"""Who may read a run's events, for the SSE endpoint (chatsite.runs.events_app).

Two ways in. The run's `events_url` carries a signed token (a presigned URL)
bound to the run, its chat and tenant, and the user and credential (API key or
session) of the request it was given to: checking it needs neither the database
nor a thread, so following a stream costs no Postgres connection. (A share link's
viewer gets such a token too, naming the link: `share_events_token`.) Without a valid
token (absent, expired after EVENTS_TOKEN_SECONDS, for another run, or revoked)
the session or the bearer key is checked against the database (`authorize_run`,
sync; called via database_sync_to_async). Either way the stream then carries a
Grant, which chatsite.tenancy.stream_guard checks for revocation while it runs.
"""
import time
from importlib import import_module
from types import SimpleNamespace

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user as auth_get_user
from django.core import signing
from django.http.cookie import parse_cookie

from chatsite.errors import ServiceError
from chatsite.runs.admission.credentials import key_authenticate
from chatsite.runs.models import GenerationRun
from chatsite.runs.outlet import AccessEnded, Outlet
from chatsite.runs.selectors import run_get
from chatsite.tenancy.credentials import bearer_token, request_credential
from chatsite.tenancy.request_context import current_request
from chatsite.tenancy.revocation import Grant, key_credential, session_credential, share_credential
from chatsite.tenancy.selectors import tenant_for_request

MAX_TOKEN_CHARS = 1024  # a real one is ~200


class Unauthenticated(ServiceError):
    status = 401
    code = "not_authenticated"


_SIGNER_SALT = "chatsite.runs.events.v2"


def _signer() -> signing.Signer:
    return signing.Signer(salt=_SIGNER_SALT)


def events_token(run: GenerationRun) -> str:
    """A token that lets its holder read this run's events for EVENTS_TOKEN_SECONDS,
    bound to the run, its chat and tenant, and the user and credential of the request
    being served (outside a request: the chat's owner, no credential). It stops
    working when any of those is revoked (chatsite.tenancy.revocation)."""
    request = current_request()
    user_id = getattr(getattr(request, "user", None), "pk", None)
    credential = request_credential(request) if user_id is not None else ""
    if user_id is None:
        user_id = run.chat.owner_id
    payload = {"r": run.pk, "c": run.chat_id, "t": run.tenant_id, "u": user_id, "k": credential,
               "i": int(time.time())}  # whole seconds: one request minting twice gets one token
    return _signer().sign_object(payload)


def share_events_token(run: GenerationRun, *, share_id: int, owner_id: int) -> str:
    """A token that lets a share link's viewer (no account) read this run's events for
    EVENTS_TOKEN_SECONDS, as the link: bound to the run, its chat and tenant, the chat's
    owner and the link, it stops working when the link is revoked (or the chat, the
    owner's membership, ...: chatsite.tenancy.revocation)."""
    payload = {"r": run.pk, "c": run.chat_id, "t": run.tenant_id, "u": owner_id,
               "k": share_credential(share_id), "s": share_id, "i": int(time.time())}
    return _signer().sign_object(payload)


def grant_of(request, run: GenerationRun) -> Grant:
    """The grant of the request being served to read the run it just made (a streamed
    POST): its user and credential, as the run's events token would carry them."""
    return Grant(run_id=run.pk, chat_id=run.chat_id, tenant_id=run.tenant_id, user_id=request.user.pk,
                 credential=request_credential(request), since=time.time())


def token_grants(token: str, run_id) -> Grant | None:
    """The grant an unexpired events token for this run carries, else None
    (revocation is checked when the stream opens, by StreamGuard.admit)."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        return None
    try:
        p = _signer().unsign_object(token)
        grant = Grant(run_id=int(p["r"]), chat_id=int(p["c"]), tenant_id=int(p["t"]), user_id=int(p["u"]),
                      credential=str(p["k"]), since=float(p["i"]), share_id=int(p.get("s", 0)))
    except (signing.BadSignature, ValueError, TypeError, KeyError, UnicodeError):
        return None
    if str(grant.run_id) != str(run_id) or time.time() - grant.since > settings.CHATSITE["EVENTS_TOKEN_SECONDS"]:
        return None
    return grant


def authorize_run(scope, run_id) -> Grant:
    """A grant if the session user or the bearer key's user may read the run;
    Unauthenticated (401) without credentials, NotFound (404) otherwise (another
    tenant's run is indistinguishable from a missing one)."""
    headers = dict(scope.get("headers", []))
    token = bearer_token(headers.get(b"authorization", b"").decode("latin-1"))
    if token:
        read = key_authenticate(token)
        if read is None:
            raise Unauthenticated("invalid or revoked API key")
        user, auth, credential = read.user, read, key_credential(read.key.pk)
    else:
        session = _session(scope)
        user, auth = (auth_get_user(SimpleNamespace(session=session)) if session is not None else None), None
        if user is None or not user.is_authenticated:
            raise Unauthenticated("sign in or send an API key as 'Authorization: Bearer KEY'")
        credential = session_credential(session.session_key)
    tenant = tenant_for_request(user, auth)
    run = run_get(tenant=tenant, user=user, run_id=run_id)
    return Grant(run_id=run.pk, chat_id=run.chat_id, tenant_id=tenant.pk, user_id=user.pk, credential=credential,
                 since=time.time())


async def open_events(scope, run_id, token: str) -> tuple[Outlet, bool]:
    """A new stream of this run's events (chatsite.runs.outlet), and whether the token
    granted it (no database then); else the session or key did. Raises Unauthenticated,
    NotFound, or TooManyStreams (429, retry_after)."""
    grant = token_grants(token, run_id)
    if grant is not None:
        try:
            return await Outlet.open(grant), True
        except AccessEnded:
            pass  # the token's grant was revoked: the request's own credentials may still grant
    grant = await database_sync_to_async(authorize_run)(scope, run_id)
    try:
        return await Outlet.open(grant), False
    except AccessEnded:  # revoked within the clock-skew margin of this very check
        raise Unauthenticated("your access to this run was just revoked; sign in again") from None


def _session(scope):
    """The request's session, from its cookie (read from the database only when used)."""
    if "session" in scope:
        return scope["session"]
    cookies = parse_cookie(dict(scope.get("headers", [])).get(b"cookie", b"").decode("latin-1"))
    key = cookies.get(settings.SESSION_COOKIE_NAME)
    return import_module(settings.SESSION_ENGINE).SessionStore(key) if key else None
