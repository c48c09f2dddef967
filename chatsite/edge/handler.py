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
back when it ends: the same one thread per request, started once.

At most WEB_THREADS of those threads run a hop at once (chatsite/edge/gate.py); the
others wait, first come first served, asleep. No database transaction spans two hops,
and a hop gives its pooled connection back when it ends, so a thread waiting to start a
hop holds nothing a running one could wait for.
"""
import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction, sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import MiddlewareNotUsed, RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.core.handlers.exception import response_for_exception
from django.db import connections
from django.http import FileResponse
from django.urls import Resolver404, get_resolver, set_script_prefix, set_urlconf
from django.utils.deprecation import MiddlewareMixin
from django.utils.log import log_response
from django.utils.module_loading import import_string

from chatsite import stage_trace
from chatsite.edge.signals import send_signal, signal_inline
from chatsite.edge.gate import Gate


# Django's own middleware (as of 5.2, the version these were read in: a test fails on
# another) whose hooks read and write only the request and the response (headers,
# cookies) unless the request carries a session. Ours say so themselves (`inline_safe =
# True`). FlatMiddleware runs the hooks on the event loop for a request without a session
# cookie when every middleware settings.MIDDLEWARE loads is one of these (measured:
# bench.per_run --callgrind web, /v1, 11.1 M instructions a run without this, 9.0 with).
DJANGO_INLINE_SAFE = frozenset({
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
})


def inline_safe(mw) -> bool:
    """Whether a loaded middleware's hooks touch no database or file for a request without a session."""
    return getattr(mw, "inline_safe", False) or f"{type(mw).__module__}.{type(mw).__qualname__}" in DJANGO_INLINE_SAFE


# One-thread executors kept for the next requests; a burst beyond this many concurrent
# Django requests (a /v1 stream holds its thread until it ends) starts threads that end with it.
IDLE_THREADS_KEPT = 64


class _GatedExecutor(ThreadPoolExecutor):
    """A one-thread executor whose every call runs in a place of `gate`."""

    def __init__(self, gate: Gate):
        super().__init__(max_workers=1, thread_name_prefix="request")
        self._gate = gate

    def submit(self, fn, /, *args, **kwargs):
        return super().submit(self._gate.run, _hop, fn, *args, **kwargs)


def _hop(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    finally:
        _give_back_pooled_connections()


class RunningGate:
    """At most `limit` request threads running a hop at once (0: no bound, Django's way):
    `executor()` makes the one-thread executors whose calls wait for a place."""

    def __init__(self, limit: int):
        self._gate = Gate(limit) if limit > 0 else None

    def executor(self) -> ThreadPoolExecutor:
        """A one-thread executor for one request at a time, its calls in the gate."""
        if self._gate is None:
            return ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")
        return _GatedExecutor(self._gate)


def _give_back_pooled_connections() -> None:
    """Return this thread's pooled database connections to their pool at the end of a
    hop (no transaction spans two hops). A thread waiting for its turn then holds no
    connection, so a hop in its turn never waits, turn held, for a connection that only
    a thread without a turn could give back (an async view's request kept its connection
    from its first hop to its response's close: 64 /v1 streams held the web's whole pool, 24)."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and not conn.in_atomic_block and conn.settings_dict["OPTIONS"].get("pool"):
            conn.close()


def _unused(request):  # pragma: no cover - a flat middleware's get_response is never called
    raise RuntimeError("a flattened middleware called its get_response")


class FlatMiddleware:
    """settings.MIDDLEWARE as two lists of hooks, for an async view.

    Django nests the middleware: each layer's process_request, then the layers inside
    it, then its process_response; an exception in a layer becomes a response there
    (convert_exception_to_response) that the outer layers' process_response still see.
    Run flat, the same order and the same rules: `before` runs process_request layer by
    layer (a layer answering, or raising, ends the walk inward), then runs process_view
    on the view the handler resolved (again if a hook set request.urlconf); `after` runs process_response for the layers entered,
    innermost first."""

    def __init__(self):
        self.layers = []
        for path in settings.MIDDLEWARE:
            try:
                mw = import_string(path)(_unused)
            except MiddlewareNotUsed:
                continue
            if not _hooks_only(mw) or hasattr(mw, "process_template_response"):
                raise TypeError(f"middleware {path} is not hooks only")
            self.layers.append(mw)
        self.inline_safe = not settings.CSRF_USE_SESSIONS and all(inline_safe(mw) for mw in self.layers)
        self.view_hooks = [mw.process_view for mw in self.layers if hasattr(mw, "process_view")]
        self.exception_hooks = [mw.process_exception for mw in reversed(self.layers)
                                if hasattr(mw, "process_exception")]

    def inline_before(self, request) -> bool:
        """Whether `before` may run on the event loop: every middleware is one whose
        request hooks touch no database or file unless the request carries a session
        (Django's session, auth and messages middleware read the session lazily, and only
        through its cookie), and this request carries none. An API client's request,
        bearer-authenticated, saves a thread hop."""
        return self.inline_safe and settings.SESSION_COOKIE_NAME not in request.COOKIES

    def inline_after(self, request, response) -> bool:
        """Whether `after` may run on the event loop: as inline_before, and the view left
        nothing to save (no session written, no message added), no error to log and no
        template to render."""
        if not self.inline_before(request) or response.status_code >= 400 or _to_render(response):
            return False
        session = getattr(request, "session", None)
        if session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST):
            return False
        messages = getattr(request, "_messages", None)
        return messages is None or not (messages.used or messages.added_new)

    def before(self, request, match):
        """(layers entered, the response if one answered before the view, the view match)."""
        for i, mw in enumerate(self.layers):
            hook = getattr(mw, "process_request", None)
            if hook is None:
                continue
            try:
                response = hook(request)
            except Exception as exc:
                return i, response_for_exception(request, exc), None
            if response is not None:
                return i + 1, response, None
        entered = len(self.layers)
        try:
            if hasattr(request, "urlconf"):  # a process_request chose another URLconf
                set_urlconf(request.urlconf)
                match = get_resolver(request.urlconf).resolve(request.path_info)
            request.resolver_match = match
            for hook in self.view_hooks:
                response = hook(request, match.func, match.args, match.kwargs)
                if response:
                    return entered, response, None
        except Exception as exc:
            return entered, response_for_exception(request, exc), None
        return entered, None, match

    def failed(self, request, exc):
        """The view raised: process_exception, innermost first, else Django's answer for it."""
        try:
            for hook in self.exception_hooks:
                response = hook(request, exc)
                if response:
                    return response
        except Exception as raised:
            exc = raised
        return response_for_exception(request, exc)

    def after(self, request, entered: int, response):
        if hasattr(response, "render") and callable(response.render):  # a TemplateResponse
            try:
                response = response.render()
            except Exception as exc:
                response = self.failed(request, exc)
        for mw in reversed(self.layers[:entered]):
            hook = getattr(mw, "process_response", None)
            if hook is None:
                continue
            try:
                response = hook(request, response)
            except Exception as exc:
                response = response_for_exception(request, exc)
        if response.status_code >= 400:
            log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request)
        return response


def _to_render(response) -> bool:
    """A TemplateResponse not rendered yet (rendering may read a template or the database);
    a REST turn's response comes rendered (chatsite.api.async_path), its hooks inline."""
    return hasattr(response, "render") and not getattr(response, "is_rendered", True)


def _hooks_only(mw) -> bool:
    """A middleware whose whole behaviour is its hooks: Django's MiddlewareMixin, or a
    class of ours that says so (`hooks_only = True`)."""
    return isinstance(mw, MiddlewareMixin) or getattr(mw, "hooks_only", False)


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
            response = await respond()
            try:
                await self.send_response(response, send)
            except asyncio.CancelledError:
                pass  # the client disconnected during send_response
            return response

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
            response = tasks[1].result()
        except asyncio.CancelledError:
            await send_signal(signals.request_finished, sender=self.__class__)
        else:
            if not getattr(response, "closed_in_hop", False):
                await self._close(response)
        body_file.close()

    async def _close(self, response) -> None:
        """response.close() (request_finished): on the event loop when its receivers reach
        nothing there (chatsite.edge.signals), else in the request's thread, as Django."""
        if signal_inline(signals.request_finished, self.__class__):
            response.close()
        else:
            await sync_to_async(response.close)()

    def _sync_request(self, request, scope):
        """A sync view's request, in its thread: request_started, the middleware and the
        view, and the response's close when its body is built."""
        stage_trace.mark("web.request")
        signals.request_started.send(sender=self.__class__, scope=scope)
        response = self._for_sending(self._sync.get_response(request))
        if not response.streaming:
            response.close()  # request_finished; the content stays as built
            response.closed_in_hop = True
        return response

    async def _async_request(self, request, match):
        """An async view's response, as ASGIHandler.run_get_response gives it (the URL resolved once)."""
        if self._flat is None:
            response = await super().get_response_async(request)
        else:
            response = await self._flat_response(request, match)
        return self._for_sending(response)

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
