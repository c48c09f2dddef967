"""OpenAI's error shape for /v1/: `{"error": {"message", "type", "param", "code"}}`.

`type` follows OpenAI's names (invalid_request_error, authentication_error,
rate_limit_error, server_error); `code` is the platform's own stable code
(model_not_found, context_length_exceeded, invalid_api_key, ...)."""
import uuid

from django.http import JsonResponse

from chatsite.errors import ServiceError

# Every /v1 answer carries one (the SDKs read it into `_request_id`); a client quotes it
# to find the request, as `X-Run-Id` finds its run.
REQUEST_ID_HEADER = "x-request-id"
TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


def error_type(status: int) -> str:
    if status >= 500:
        return "server_error"
    return TYPES.get(status, "invalid_request_error")


def request_id() -> str:
    """A new request id, in OpenAI's form (`req_` and 32 hex digits)."""
    return f"req_{uuid.uuid4().hex}"


def openai_error_body(status: int, code: str | None, message: str, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": error_type(status), "param": param, "code": code}}


def error_response(status: int, code: str | None, message: str, param: str | None = None,
                   headers: dict | None = None) -> JsonResponse:
    response = JsonResponse(openai_error_body(status, code, message, param), status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


class OpenAIError(Exception):
    """An error a /v1/ view answers with at once (auth, body, method)."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.param, self.headers = status, code, message, param, headers


def from_service_error(exc: ServiceError) -> JsonResponse:
    """A typed service error in OpenAI's shape. An unknown model is a 404, as on OpenAI."""
    status = 404 if exc.code == "model_not_found" else exc.status
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
    message = exc.message.replace("GET /api/models/", "GET /v1/models")  # the list this client knows
    return error_response(status, exc.code, message, _param(exc.field), headers)


def _param(field: str | None) -> str | None:
    # The REST layer names the header; OpenAI clients know parameters only.
    return None if field in (None, "Idempotency-Key") else field
