"""Who may read a run's events, for the SSE consumer.

Two ways in. The run's `events_url` carries a signed token naming the run (a
presigned URL): checking it needs neither the database nor a thread, so following a
stream costs no Postgres connection. Without a valid token (absent, expired after
EVENTS_TOKEN_SECONDS, or for another run) the session or the bearer key is checked
against the database (`authorize_run`, sync; called via database_sync_to_async).
"""
from importlib import import_module
from types import SimpleNamespace

from django.conf import settings
from django.contrib.auth import get_user as auth_get_user
from django.core import signing
from django.http.cookie import parse_cookie

from chatsite.errors import ServiceError
from chatsite.runs.models import GenerationRun
from chatsite.runs.selectors import run_get
from chatsite.tenancy.auth import bearer_token
from chatsite.tenancy.selectors import tenant_for_request
from chatsite.tenancy.services import api_key_authenticate


class Unauthenticated(ServiceError):
    status = 401
    code = "not_authenticated"


_SIGNER_SALT = "chatsite.runs.events"


def events_token(run_id: int) -> str:
    """A token that lets its holder read this run's events for EVENTS_TOKEN_SECONDS."""
    return signing.TimestampSigner(salt=_SIGNER_SALT).sign(str(run_id))


def token_grants(token: str, run_id) -> bool:
    """Whether `token` is an unexpired events token for this run."""
    if not token:
        return False
    try:
        value = signing.TimestampSigner(salt=_SIGNER_SALT).unsign(
            token, max_age=settings.CHATSITE["EVENTS_TOKEN_SECONDS"])
    except signing.BadSignature:  # also SignatureExpired
        return False
    return value == str(run_id)


def authorize_run(scope, run_id) -> GenerationRun:
    """The run if the session user or the bearer key's user may read it; NotFound
    otherwise (another tenant's run is indistinguishable from a missing one)."""
    headers = dict(scope.get("headers", []))
    token = bearer_token(headers.get(b"authorization", b"").decode("latin-1"))
    if token:
        key = api_key_authenticate(token)
        if key is None:
            raise Unauthenticated("invalid or revoked API key")
        user, auth = key.user, key
    else:
        user, auth = _session_user(scope), None
        if user is None or not user.is_authenticated:
            raise Unauthenticated("sign in or send an API key as 'Authorization: Bearer KEY'")
    tenant = tenant_for_request(user, auth)
    return run_get(tenant=tenant, user=user, run_id=run_id)


def _session_user(scope):
    """The signed-in user of the request's session cookie (read from the database only now)."""
    if "user" in scope:
        return scope["user"]
    session = scope.get("session")
    if session is None:
        cookies = parse_cookie(dict(scope.get("headers", [])).get(b"cookie", b"").decode("latin-1"))
        key = cookies.get(settings.SESSION_COOKIE_NAME)
        if not key:
            return None
        session = import_module(settings.SESSION_ENGINE).SessionStore(key)
    return auth_get_user(SimpleNamespace(session=session))
