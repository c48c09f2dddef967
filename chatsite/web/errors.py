"""The product's own error pages: not found, refused, a failed CSRF check, a bad request
and a bug, in the look of the sign-in page, saying what to do next and nothing of the
settings, the URL patterns or the code. Under /api/ and /v1/ every error is JSON instead
(chatsite.api.middleware turns these pages into that API's shape)."""
import logging

from django.http import HttpResponse
from django.shortcuts import render

from chatsite.api.errors import json_handler404, json_handler500
from chatsite.web.csp import POLICY

log = logging.getLogger(__name__)
API_PREFIXES = ("/api/", "/v1/")

PAGES = {
    400: ("Bad request", "That address or form could not be read. Go back and try again."),
    403: ("Not allowed", "Your account cannot open this page."),
    404: ("Not found", "There is nothing here, or it is not yours to see."),
    500: ("Something went wrong", "It has been logged and we will look into it. Try again in a moment."),
}
CSRF = ("This form has expired", "The page was open too long, or you signed in or out in another window. "
        "Reload the page and try again; nothing was changed.")


def _page(request, status: int, title: str, message: str):
    response = render(request, "web/error.html", {"title": title, "message": message, "status": status},
                      status=status)
    response.headers.setdefault("Content-Security-Policy", POLICY)
    return response


def not_found_page(request):
    """The 404 page, whatever DEBUG says (a view that knows the answer is "nothing here")."""
    return _page(request, 404, *PAGES[404])


def handler400(request, exception=None):
    return _page(request, 400, *PAGES[400])


def handler403(request, exception=None):
    return _page(request, 403, *PAGES[403])


def handler404(request, exception=None):
    if request.path.startswith(API_PREFIXES):
        return json_handler404(request, exception)
    return _page(request, 404, *PAGES[404])


def csrf_failure(request, reason: str = ""):
    """CSRF_FAILURE_VIEW: Django's own page names the setting and the reason."""
    return _page(request, 403, *CSRF)


def handler500(request):
    if request.path.startswith(API_PREFIXES):
        return json_handler500(request)
    try:  # the page itself must not fail: a template or a static file gone wrong falls back to text
        return _page(request, 500, *PAGES[500])
    except Exception:
        log.exception("the error page could not be rendered")
        return HttpResponse(PAGES[500][1], status=500, content_type="text/plain; charset=utf-8")
