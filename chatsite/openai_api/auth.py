"""`Authorization: Bearer KEY` for the /v1/ views, the grant their streams carry, and their JSON body."""
import time

from asgiref.sync import sync_to_async
from django.core.exceptions import RequestDataTooBig

from chatsite.json_body import BodyError, decode_json, too_large_message
from chatsite.openai_api.errors import OpenAIError
from chatsite.runs.admission.credentials import key_authenticate
from chatsite.tenancy.credentials import KeyRead, bearer_token
from chatsite.tenancy.revocation import Grant, key_credential

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="v1"'}
REVOKED_MESSAGE = "The API key was revoked while the reply was being read; the run goes on and is saved."


def key_grant(read: KeyRead, run=None) -> Grant:
    """What a /v1 stream of `run` (None: not admitted yet) carries: the key, its user and
    tenant, since now (chatsite.runs.outlet)."""
    key = read.key
    return Grant(run_id=run.pk if run else 0, chat_id=run.chat_id if run else 0, tenant_id=key.tenant_id,
                 user_id=key.user_id, credential=key_credential(key.pk), since=time.time())


async def authenticate(request) -> KeyRead:
    """The request's live API key (with its tenant's limits), or OpenAIError 401."""
    return _checked(await sync_to_async(key_authenticate)(_token(request)))


def authenticate_sync(request) -> KeyRead:
    """authenticate(), for code already off the event loop."""
    return _checked(key_authenticate(_token(request)))


def _token(request) -> str:
    token = bearer_token(request.headers.get("Authorization"))
    if token is None:
        raise OpenAIError(401, "missing_api_key", "You didn't provide an API key. Send it as "
                          "'Authorization: Bearer KEY'; create one with POST /api/keys/.", headers=CHALLENGE)
    return token


def _checked(key: KeyRead | None) -> KeyRead:
    if key is None:
        raise OpenAIError(401, "invalid_api_key", "The API key is invalid or has been revoked; check it, "
                          "or create a new one with POST /api/keys/.", headers=CHALLENGE)
    return key


def require_method(request, *methods: str) -> None:
    if request.method not in methods:
        raise OpenAIError(405, "method_not_allowed", f"{request.method} is not allowed here; use "
                          f"{' or '.join(methods)}", headers={"Allow": ", ".join(methods)})


def json_body(request):
    """The decoded JSON body, or OpenAIError 400 / 413 / 415 saying what is wrong with it."""
    if request.content_type not in ("application/json", "", None):
        raise OpenAIError(415, "unsupported_media_type", "send the body as JSON, with the header "
                          "'Content-Type: application/json'")
    try:
        return decode_json(request.body)
    except RequestDataTooBig:
        raise OpenAIError(413, "request_too_large", too_large_message()) from None
    except BodyError as exc:
        raise OpenAIError(400, "invalid_json", str(exc)) from None
