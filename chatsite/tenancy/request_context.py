"""The request being served, for code that mints credentials on its behalf.

An events token (chatsite.runs.access.events_token) is bound to the user and the
credential (API key or session) of the request that is given it, and is minted
deep inside serializers that never see the request. This innermost middleware
makes the request visible to them for its duration (a context variable: each
request, thread or task sees its own). Nothing else should read it.
"""
from contextvars import ContextVar

from django.utils.deprecation import MiddlewareMixin

_request: ContextVar = ContextVar("chatsite_request", default=None)


def current_request():
    """The HttpRequest being served in this context, or None (a task, a shell)."""
    return _request.get()


class RequestContextMiddleware(MiddlewareMixin):
    """Hooks only, so that the ASGI handler can run them in its hops
    (chatsite/edge/handler.py); the request is visible from process_request on, in the
    request's context (asgiref carries a variable set in a thread hop back to the event
    loop's task, where an async view runs)."""

    inline_safe = True  # it sets a context variable: no database, no file

    def process_request(self, request):
        _request.set(request)

    def process_response(self, request, response):
        _request.set(None)
        return response
