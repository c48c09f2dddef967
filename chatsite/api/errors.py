"""One JSON error shape for every 4xx/5xx of the API:
`{"error": {"code": "...", "message": "...", "field": "..."}}`.

Under /v1/ (the OpenAI-compatible API) the same errors use OpenAI's shape,
`{"error": {"message", "type", "param", "code"}}` (see chatsite.openai_api.errors).
"""
import logging

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf_exc
from rest_framework.response import Response

from chatsite.errors import UNAVAILABLE, ServiceError, error_body, error_body_for, error_headers_for
from chatsite.json_body import too_large_message

log = logging.getLogger(__name__)



def edge_error(path: str, status: int, code: str, message: str, field: str | None = None,
               headers: dict | None = None) -> JsonResponse:
    """An error response in the shape the URL's API uses (REST or OpenAI)."""
    headers = {**error_headers_for(path), **(headers or {})}
    response = JsonResponse(error_body_for(path, status, code, message, field), status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def _flatten(detail) -> tuple[str, str | None]:
    if isinstance(detail, dict):
        for key, value in detail.items():
            text, _ = _flatten(value)
            return (text if key == "non_field_errors" else f"{key}: {text}"), key
    if isinstance(detail, list) and detail:
        return _flatten(detail[0])
    return str(detail), None


def _drf_error(exc: drf_exc.APIException, request, view) -> Response:
    headers = {}
    if getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(exc.wait))
    if isinstance(exc, (drf_exc.NotAuthenticated, drf_exc.AuthenticationFailed)):
        headers["WWW-Authenticate"] = 'Bearer realm="api"'
        message, _ = _flatten(exc.detail)
        if isinstance(exc, drf_exc.NotAuthenticated):
            message = "sign in, or send an API key as 'Authorization: Bearer KEY'"
        return Response(error_body("not_authenticated", message), status=401, headers=headers)
    if isinstance(exc, drf_exc.ValidationError):
        message, field = _flatten(exc.detail)
        return Response(error_body("invalid_request", message, field), status=400)
    if isinstance(exc, drf_exc.MethodNotAllowed):
        allowed = [m for m in getattr(view, "allowed_methods", []) if m not in ("OPTIONS", "HEAD")]
        hint = f"; use {' or '.join(allowed)}" if allowed else ""
        return Response(error_body("method_not_allowed", f"{request.method} is not allowed here{hint}"), status=405)
    if isinstance(exc, drf_exc.UnsupportedMediaType):
        return Response(error_body("unsupported_media_type", "send the body as JSON, with the header "
                                   "'Content-Type: application/json'"), status=415)
    if isinstance(exc, drf_exc.ParseError):
        message, _ = _flatten(exc.detail)
        return Response(error_body("invalid_json", message), status=400)
    code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
    message, _ = _flatten(exc.detail)
    return Response(error_body(code, message), status=exc.status_code, headers=headers)


def exception_handler(exc, context):
    """DRF's hook: typed service errors, DRF's own errors and Django's, one shape."""
    if isinstance(exc, ServiceError):
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else {}
        return Response(error_body(exc.code, exc.message, exc.field), status=exc.status, headers=headers)
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body("request_too_large", too_large_message()), status=413)
    if isinstance(exc, Http404):
        return Response(error_body("not_found", "not found"), status=404)
    if isinstance(exc, PermissionDenied):
        return Response(error_body("permission_denied", "you may not do this"), status=403)
    if isinstance(exc, drf_exc.APIException):
        return _drf_error(exc, context.get("request"), context.get("view"))
    if isinstance(exc, UNAVAILABLE):
        log.warning("backing store unavailable: %s", exc)  # Postgres or Redis restarting: nothing was written
        return Response(error_body("service_unavailable", "the service is briefly unavailable; nothing was saved, "
                                   "try again in a few seconds"), status=503, headers={"Retry-After": "5"})
    return None  # a bug: Django's 500 handler answers (JSON for /api/, see json_handler500)


def json_handler404(request, exception=None):
    return edge_error(request.path, 404, "not_found", f"no such endpoint: {request.path}")


def json_handler500(request):
    return edge_error(request.path, 500, "server_error", "something went wrong on our side; it has been logged")
