"""One JSON error shape for every 4xx/5xx of the API:
`{"error": {"code": "...", "message": "...", "field": "..."}}`."""
import logging

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf_exc
from rest_framework.response import Response

from chatsite.errors import ServiceError

log = logging.getLogger(__name__)


def error_body(code: str, message: str, field: str | None = None) -> dict:
    err = {"code": code, "message": message}
    if field:
        err["field"] = field
    return {"error": err}


def _flatten(detail, prefix: str = "") -> tuple[str, str | None]:
    if isinstance(detail, dict):
        for key, value in detail.items():
            text, _ = _flatten(value)
            return (text if key == "non_field_errors" else f"{key}: {text}"), key
    if isinstance(detail, list) and detail:
        return _flatten(detail[0])
    return str(detail), None


def exception_handler(exc, context):
    """DRF's hook: typed service errors, DRF's own errors and Django's, one shape."""
    headers = {}
    if isinstance(exc, ServiceError):
        if exc.retry_after is not None:
            headers["Retry-After"] = str(exc.retry_after)
        return Response(error_body(exc.code, exc.message, exc.field), status=exc.status, headers=headers)
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body("request_too_large", "the request body is too large"), status=413)
    if isinstance(exc, Http404):
        return Response(error_body("not_found", "not found"), status=404)
    if isinstance(exc, PermissionDenied):
        return Response(error_body("permission_denied", "you may not do this"), status=403)
    if isinstance(exc, drf_exc.APIException):
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))
        if isinstance(exc, (drf_exc.NotAuthenticated, drf_exc.AuthenticationFailed)):
            headers["WWW-Authenticate"] = 'Bearer realm="api"'
        if isinstance(exc, drf_exc.ValidationError):
            message, field = _flatten(exc.detail)
            return Response(error_body("invalid_request", message, field), status=400)
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        message, _ = _flatten(exc.detail)
        return Response(error_body(code, message), status=exc.status_code, headers=headers)
    return None  # a bug: Django's 500 handler answers (JSON for /api/, see json_handler500)


def json_handler404(request, exception=None):
    return JsonResponse(error_body("not_found", f"no such endpoint: {request.path}"), status=404)


def json_handler500(request):
    return JsonResponse(error_body("server_error", "something went wrong on our side; it has been logged"),
                        status=500)
