"""Under /api/ and /v1/, every error is JSON in that API's shape, whatever raised it.

DRF views and the OpenAI views answer their own errors; this catches the rest:
Django's 404 for an unknown URL and 500 for a bug (HTML pages, and DEBUG's
technical pages), 405s of plain Django views, CSRF failures, oversized bodies.
Sync and async capable, so async views stay on the event loop.
"""
from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import JsonResponse
from django.urls import is_valid_path

from chatsite.api.errors import edge_error
from chatsite.json_body import too_large_message

API_PREFIXES = ("/api/", "/v1/")
KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate")


def _message(request, response) -> tuple[str, str]:
    status = response.status_code
    if status == 404:
        return "not_found", f"no such endpoint: {request.path}"
    if status == 405:
        allowed = response.get("Allow", "")
        return "method_not_allowed", f"{request.method} is not allowed here" + (f"; use {allowed}" if allowed else "")
    if status == 413:
        return "request_too_large", too_large_message()
    if status == 403:
        return "forbidden", ("forbidden; API clients should send 'Authorization: Bearer KEY' "
                             "(a signed-in browser also needs the CSRF token)")
    if status >= 500:
        return "server_error", "something went wrong on our side; it has been logged"
    return "bad_request", "the request is malformed; check its URL, headers and body"


class ApiErrorMiddleware:
    sync_capable = True
    async_capable = True
    hooks_only = True  # its whole behaviour is the two hooks below (chatsite/edge/flat_middleware.py)
    inline_safe = True  # they read and write the request and the response only

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self._acall(request)
        early = self._before(request)
        return early if early is not None else self._after(request, self.get_response(request))

    async def _acall(self, request):
        early = self._before(request)
        return early if early is not None else self._after(request, await self.get_response(request))

    def process_request(self, request):
        return self._before(request)

    def process_response(self, request, response):
        return self._after(request, response)

    @staticmethod
    def _before(request):
        path = request.path
        if not path.startswith(API_PREFIXES):
            return None
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return edge_error(path, 400, "bad_request", "the Content-Length header is not a number")
        if settings.DATA_UPLOAD_MAX_MEMORY_SIZE is not None and length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            return edge_error(path, 413, "request_too_large", too_large_message())
        if not path.endswith("/") and not is_valid_path(path) and is_valid_path(path + "/"):
            return edge_error(path, 404, "not_found", f"no such endpoint: {path}; did you mean {path}/ "
                                                      "(with a trailing slash)?")
        return None

    @staticmethod
    def _after(request, response):
        if (response.status_code < 400 or not request.path.startswith(API_PREFIXES)
                or getattr(response, "streaming", False)
                or response.get("Content-Type", "").startswith("application/json")):
            return response
        kept = {h: response[h] for h in KEPT_HEADERS if response.has_header(h)}
        data = getattr(response, "data", None)  # a DRF error rendered for a browser (Accept: text/html)
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            reshaped = JsonResponse(data, status=response.status_code)
            for name, value in kept.items():
                reshaped[name] = value
            return reshaped
        code, message = _message(request, response)
        return edge_error(request.path, response.status_code, code, message, headers=kept)
