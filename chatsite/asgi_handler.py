"""Django's ASGI handler, with a sync view's request served in one thread hop.

Under ASGI, Django runs every sync middleware's process_request, process_view and
process_response, and then the sync view, each through its own sync_to_async call:
about 14 hops from the event loop to the request's thread and back for one API
request, ~90 us of CPU each on this machine. A request whose view is sync (DRF's
views, the web pages, the admin) is handed instead to the same middleware loaded in
sync mode (Django's WSGI path), in one hop. Async views (the /v1 API) keep Django's
async path. The middleware, the views and what they return are the same either way.
"""
from asgiref.sync import iscoroutinefunction, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.urls import Resolver404, get_resolver


class OneHopASGIHandler(ASGIHandler):
    def __init__(self):
        super().__init__()
        self._sync = BaseHandler()
        self._sync.load_middleware(is_async=False)

    async def get_response_async(self, request):
        if self._async_view(request):
            return await super().get_response_async(request)
        return await sync_to_async(self._sync.get_response, thread_sensitive=True)(request)

    @staticmethod
    def _async_view(request) -> bool:
        try:
            match = get_resolver().resolve(request.path_info)
        except Resolver404:
            return False  # the 404 (or the trailing-slash redirect) comes from the sync path
        return iscoroutinefunction(match.func)


def get_asgi_application() -> OneHopASGIHandler:
    """As django.core.asgi.get_asgi_application, with this handler."""
    import django

    django.setup(set_prefix=False)
    return OneHopASGIHandler()
