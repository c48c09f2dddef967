"""Django's ASGI handler, with a sync view's request served in one thread hop, on a
thread kept for the next request.

Under ASGI, Django runs every sync middleware's process_request, process_view and
process_response, and then the sync view, each through its own sync_to_async call:
about 14 hops from the event loop to the request's thread and back for one API
request, ~90 us of CPU each on this machine. A request whose view is sync (DRF's
views, the web pages, the admin) is handed instead to the same middleware loaded in
sync mode (Django's WSGI path), in one hop. Async views (the /v1 API) keep Django's
async path. The middleware, the views and what they return are the same either way.

Django also gives every request a thread of its own (asgiref's ThreadSensitiveContext:
a new single-thread executor, started and shut down per request, ~0.5 ms of CPU
here). A request still gets one thread for all its sync code, but the thread is
lent from those kept idle by earlier requests (Executors), as a WSGI server's
threads serve one request after another.
"""
import threading
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.urls import Resolver404, get_resolver

KEEP_IDLE_THREADS = 64  # threads kept for the next requests; more are made while more run at once


class _RequestThread(ThreadPoolExecutor):
    """One thread, and how many calls it has taken and not finished."""

    def __init__(self):
        super().__init__(max_workers=1, thread_name_prefix="django-request")
        self.pending = 0
        self._count = threading.Lock()

    def submit(self, fn, /, *args, **kwargs):
        with self._count:
            self.pending += 1
        return super().submit(self._run, fn, args, kwargs)

    def _run(self, fn, args, kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            with self._count:
                self.pending -= 1


class Executors:
    """Single-thread executors lent to one request at a time. One that still runs a
    call when its request ends (the client left while its view ran on) is not lent
    again: it finishes that call and its thread ends."""

    def __init__(self, keep: int = KEEP_IDLE_THREADS):
        self._idle: list[_RequestThread] = []
        self._keep = keep
        self._lock = threading.Lock()

    def take(self) -> _RequestThread:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _RequestThread()

    def give(self, executor: _RequestThread) -> None:
        with self._lock:
            if executor.pending == 0 and len(self._idle) < self._keep:
                self._idle.append(executor)
                return
        executor.shutdown(wait=False)


class OneHopASGIHandler(ASGIHandler):
    def __init__(self):
        super().__init__()
        self._sync = BaseHandler()
        self._sync.load_middleware(is_async=False)
        self._executors = Executors()

    async def __call__(self, scope, receive, send):
        """As Django's, with the request's thread lent from the kept ones."""
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self._executors.take()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self._executors.give(executor)

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
