"""Typed errors a user can cause; the API turns each into one JSON error shape."""


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


class Overloaded(ServiceError):
    """The pool is shedding load: retry after `retry_after` seconds."""

    status = 503
    code = "overloaded"
