"""Django's ASGI handler, with a request's middleware run in one or two thread hops.

Under ASGI, Django runs every sync middleware's process_request, process_view and
process_response, and then a sync view, each through its own sync_to_async call:
about 14 hops from the event loop to the request's thread and back for one API
request, ~90 us of CPU each when first measured (Session 10), ~170 us in a loop here.
- A request whose view is sync (DRF's views, the web pages, the admin) is handed
  instead to the same middleware loaded in sync mode (Django's WSGI path), in one hop,
  which also sends request_started and, for a response whose body is built, closes it
  (request_finished): Django gave each of those a hop of its own.
- A request whose view is async (the /v1 API) runs the same middleware's hooks in
  two hops: every process_request and process_view before the view, every
  process_response after it (`FlatMiddleware`); the view itself stays on the event
  loop. This needs every middleware to be hooks only (MiddlewareMixin's shape); with
  one that is not, async views keep Django's own async path. A request without a
  session cookie (an API client's) runs them on the event loop, no hop at all, when
  every middleware is one known to reach no database or file then (`inline_safe`).
The middleware, the views and what they return are the same either way.

Django gives every request a thread of its own (ThreadSensitiveContext): asgiref
started a thread for it and another to join it at the end, two thread starts per
request. Here a request leases a one-thread executor from a free list and gives it
back when it ends: the same one thread per request, started once. Each hop there waits
for a place in the web's gate and gives its pooled database connections back when it
ends (chatsite.edge.request_threads); an async view's middleware runs flat
(chatsite.edge.flat_middleware).
"""
import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction, sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.http import FileResponse
from django.urls import Resolver404, get_resolver, set_script_prefix, set_urlconf

from chatsite import stage_trace
from chatsite.edge.flat_middleware import FlatMiddleware
from chatsite.edge.request_threads import RunningGate
from chatsite.edge.signals import send_signal, signal_inline


# One-thread executors kept for the next requests; a burst beyond this many concurrent
# Django requests (a /v1 stream holds its thread until it ends) starts threads that end with it.
IDLE_THREADS_KEPT = 64


class OneHopASGIHandler(ASGIHandler):
    def __init__(self):
        super().__init__()
        self._idle_threads: list[ThreadPoolExecutor] = []  # one-thread executors no request holds
        self._gate = RunningGate(settings.CHATSITE["WEB_THREADS"])
        self._sync = BaseHandler()
        self._sync.load_middleware(is_async=False)
        try:
            self._flat = FlatMiddleware()
        except TypeError:
            self._flat = None  # a middleware that is more than hooks: Django's async path

    async def __call__(self, scope, receive, send):
        """As ASGIHandler.__call__, in a leased thread: every thread-sensitive call of the
        request (its signals, middleware, view, response.close) runs on that one thread, as
        in Django, each in its turn (RunningGate); a hop still running when the request ends
        (its task was cancelled) only delays the thread's next request."""
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        idle = self._idle_threads
        executor = idle.pop() if idle else self._gate.executor()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            if len(idle) < IDLE_THREADS_KEPT:
                idle.append(executor)
            else:  # past a burst: the thread ends once it is done (no wait here)
                executor.shutdown(wait=False)

    async def handle(self, scope, receive, send):
        """Django's ASGIHandler.handle (5.2), with a sync view's request in one thread hop in
        all: request_started's receivers, the middleware and the view, and the close of a
        response whose body is built (request_finished's receivers) run in that hop, where
        Django gave the first and the last a hop each (~170 us of CPU per hop here). The
        response is closed before it is sent, which nothing in it reads. An async view's
        request, a streamed response's close and a request Django cannot build keep Django's
        steps; so do a client's disconnect (the view's task cancelled) and its signal; but
        their request_started and request_finished run on the event loop when no receiver
        reaches anything from there (chatsite.edge.signals), two hops fewer a /v1 call."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            await send_signal(signals.request_started, sender=self.__class__, scope=scope)
            body_file.close()
            await self.send_response(error_response, send)
            await self._close(error_response)
            return
        match = self._async_view(request)
        if match is None:
            respond = functools.partial(sync_to_async(self._sync_request, thread_sensitive=True), request, scope)
        else:
            await send_signal(signals.request_started, sender=self.__class__, scope=scope)
            respond = functools.partial(self._async_request, request, match)

        async def process_request(send):
            response, closed = await respond()
            try:
                await self.send_response(response, send)
            except asyncio.CancelledError:
                pass  # the client disconnected during send_response
            return response, closed

        tasks = [asyncio.create_task(self.listen_for_disconnect(receive)),
                 asyncio.create_task(process_request(send))]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:  # as Django: the disconnect listener first, then the request
            if task.done():
                try:
                    task.result()
                except RequestAborted:
                    pass
                except AssertionError:
                    body_file.close()
                    raise
            else:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        try:
            response, closed = tasks[1].result()
        except asyncio.CancelledError:
            await send_signal(signals.request_finished, sender=self.__class__)
        else:
            if not closed:
                await self._close(response)
        body_file.close()

    async def _close(self, response) -> None:
        """response.close() (request_finished): on the event loop when its receivers reach
        nothing there (chatsite.edge.signals), else in the request's thread, as Django."""
        if signal_inline(signals.request_finished, self.__class__):
            response.close()
        else:
            await sync_to_async(response.close)()

    def _sync_request(self, request, scope) -> tuple:
        """A sync view's request, in its thread: request_started, the middleware and the
        view, and the response's close when its body is built. (response, closed)."""
        stage_trace.mark("web.request")
        signals.request_started.send(sender=self.__class__, scope=scope)
        response = self._for_sending(self._sync.get_response(request))
        if response.streaming:
            return response, False
        response.close()  # request_finished; the content stays as built
        return response, True

    async def _async_request(self, request, match) -> tuple:
        """An async view's response, as ASGIHandler.run_get_response gives it (the URL resolved
        once), not closed yet: (response, False)."""
        if self._flat is None:
            response = await super().get_response_async(request)
        else:
            response = await self._flat_response(request, match)
        return self._for_sending(response), False

    def _for_sending(self, response):
        """What ASGIHandler.run_get_response sets on a response before it is sent."""
        response._handler_class = self.__class__
        if isinstance(response, FileResponse):
            response.block_size = self.chunk_size
        return response

    async def _flat_response(self, request, match):
        set_urlconf(settings.ROOT_URLCONF)
        flat = self._flat
        if flat.inline_before(request):
            entered, response, match = flat.before(request, match)
        else:
            entered, response, match = await sync_to_async(flat.before, thread_sensitive=True)(request, match)
        if response is None:
            try:
                response = await self.make_view_atomic(match.func)(request, *match.args, **match.kwargs)
            except Exception as exc:
                response = await sync_to_async(flat.failed, thread_sensitive=True)(request, exc)
            self.check_response(response, match.func)
        if flat.inline_after(request, response):
            response = flat.after(request, entered, response)
        else:
            response = await sync_to_async(flat.after, thread_sensitive=True)(request, entered, response)
        response._resource_closers.append(request.close)
        return response

    @staticmethod
    def _async_view(request):
        """The URL's match when its view is async, else None."""
        try:
            match = get_resolver().resolve(request.path_info)
        except Resolver404:
            return None  # the 404 (or the trailing-slash redirect) comes from the sync path
        return match if iscoroutinefunction(match.func) else None


def get_asgi_application() -> OneHopASGIHandler:
    """As django.core.asgi.get_asgi_application, with this handler."""
    import django

    django.setup(set_prefix=False)
    return OneHopASGIHandler()
