"""The request being served, for code that mints credentials on its behalf.

An events token (chatsite.runs.access.events_token) is bound to the user and the
credential (API key or session) of the request that is given it, and is minted
deep inside serializers that never see the request. This innermost middleware
makes the request visible to them for its duration (a context variable: each
request, thread or task sees its own). Nothing else should read it.
"""
from contextvars import ContextVar

from asgiref.sync import iscoroutinefunction
from django.utils.decorators import sync_and_async_middleware

_request: ContextVar = ContextVar("chatsite_request", default=None)


def current_request():
    """The HttpRequest being served in this context, or None (a task, a shell)."""
    return _request.get()


@sync_and_async_middleware
def request_context_middleware(get_response):
    if iscoroutinefunction(get_response):
        async def middleware(request):
            token = _request.set(request)
            try:
                return await get_response(request)
            finally:
                _request.reset(token)
    else:
        def middleware(request):
            token = _request.set(request)
            try:
                return get_response(request)
            finally:
                _request.reset(token)
    return middleware
