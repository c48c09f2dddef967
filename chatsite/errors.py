"""Typed errors a user can cause; the API turns each into one JSON error shape. And the
errors of a backing store briefly away, which every surface answers 503 + Retry-After."""
import uuid

import redis
from django.db import InterfaceError, OperationalError

# Postgres or Redis away for a moment (a restart, a partition): the client should retry.
UNAVAILABLE = (OperationalError, InterfaceError, redis.ConnectionError, redis.TimeoutError)


class ServiceError(Exception):
    """Base: `status` is the HTTP status at the edge, `code` a stable machine name."""

    status = 400
    code = "invalid_request"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None,
                 retry_after: int | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.retry_after = retry_after
        if code:
            self.code = code


class InvalidInput(ServiceError):
    status = 400
    code = "invalid_request"


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Conflict(ServiceError):
    status = 409
    code = "conflict"


class ModelUnavailable(ServiceError):
    """No worker serves the model right now (none has sent a heartbeat for a few
    seconds): retry after `retry_after` seconds, or use another model."""

    status = 503
    code = "model_unavailable"


class RateLimited(ServiceError):
    """The tenant's own limits (budget, concurrency, rate): retry later."""

    status = 429
    code = "rate_limited"
    counted = False  # counted on the tenant's usage row already (quotas.services.refusals_counted)


class Overloaded(ServiceError):
    """The pool is shedding load: retry after `retry_after` seconds."""

    status = 503
    code = "overloaded"


# The two wire shapes of an error: the REST API's, and OpenAI's under /v1/.
OPENAI_PREFIX = "/v1/"
OPENAI_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


def error_body(code: str, message: str, field: str | None = None) -> dict:
    """The REST API's: `{"error": {"code", "message"[, "field"]}}`."""
    err = {"code": code, "message": message}
    if field:
        err["field"] = field
    return {"error": err}


def openai_error_type(status: int) -> str:
    if status >= 500:
        return "server_error"
    return OPENAI_TYPES.get(status, "invalid_request_error")


def openai_error_body(status: int, code: str | None, message: str, param: str | None = None) -> dict:
    """OpenAI's: `{"error": {"message", "type", "param", "code"}}`."""
    return {"error": {"message": message, "type": openai_error_type(status), "param": param, "code": code}}


# Every /v1 answer carries one (the SDKs read it into `_request_id`); a client quotes it to
# find the request, as `X-Run-Id` finds its run.
REQUEST_ID_HEADER = "x-request-id"


def request_id() -> str:
    """A new request id, in OpenAI's form (`req_` and 32 hex digits)."""
    return f"req_{uuid.uuid4().hex}"


def error_headers_for(path: str) -> dict:
    """The headers an error answer of the URL's API carries beyond its body's (a /v1 one's request id)."""
    return {REQUEST_ID_HEADER: request_id()} if path.startswith(OPENAI_PREFIX) else {}


def error_body_for(path: str, status: int, code: str, message: str, field: str | None = None) -> dict:
    """An error in the shape the URL's API uses."""
    if path.startswith(OPENAI_PREFIX):
        return openai_error_body(status, code, message, field)
    return error_body(code, message, field)
