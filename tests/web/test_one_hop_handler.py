"""The ASGI handler serves a sync view's request in one thread hop, through the same
middleware (chatsite/edge/handler.py), and an async view's middleware in two hops
around the view, which runs on the event loop."""
import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import SyncToAsync
from asgiref.testing import ApplicationCommunicator

from chatsite.edge.handler import OneHopASGIHandler

pytestmark = pytest.mark.django_db(transaction=True)


def _run(coro):
    """asyncio.run on a thread of its own: the suite's browser tests leave an event loop
    running on the main thread (Playwright's sync API)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result(60)


def _scope(path: str, headers=()) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"host", b"testserver"), *headers], "client": ("127.0.0.1", 1),
            "server": ("testserver", 80)}


async def _get(path: str, monkeypatch, headers=()) -> tuple[dict, bytes, list[str]]:
    """The response start, its body, and what was run through sync_to_async meanwhile."""
    hops, call = [], SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await call(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counted)
    comm = ApplicationCommunicator(OneHopASGIHandler(), _scope(path, headers))
    await comm.send_input({"type": "http.request", "body": b""})
    start = await comm.receive_output(10)
    body = b""
    while True:
        message = await comm.receive_output(10)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await comm.wait(10)  # the request's end: its response closed
    monkeypatch.setattr(SyncToAsync, "__call__", call)
    return start, body, hops


def _headers(start) -> dict:
    return {k.decode().lower(): v.decode() for k, v in start["headers"]}


def test_a_sync_view_is_served_in_one_hop_with_every_middleware(monkeypatch):
    start, body, hops = _run(_get("/login/", monkeypatch))
    headers = _headers(start)
    assert start["status"] == 200 and b"<form" in body
    assert headers["x-frame-options"] == "DENY"  # XFrameOptionsMiddleware's process_response
    assert headers["x-content-type-options"] == "nosniff"  # SecurityMiddleware's
    assert "csrftoken" in headers.get("set-cookie", "")  # CsrfViewMiddleware's, for the login form
    # One hop in all: request_started's receivers, the middleware and the view, and the
    # response's close (request_finished's receivers). Django's handle took two until the
    # body was sent (request_started's, the view's: counted here), and a third to close it.
    assert hops == ["OneHopASGIHandler._sync_request"], hops


def _every_url_is(monkeypatch, view) -> None:
    """The handler resolves every path to `view` (an async view of the test's)."""
    from django.urls import ResolverMatch

    from chatsite.edge import handler

    class Resolver:
        def resolve(self, path):
            return ResolverMatch(view, (), {}, route=path)

    monkeypatch.setattr(handler, "get_resolver", lambda urlconf=None: Resolver())


def _middleware_hops(hops) -> list[str]:
    assert not [h for h in hops if "process_" in h], hops  # never one hop per hook
    return [h for h in hops if h.startswith("FlatMiddleware.")]


def test_an_async_view_runs_every_middleware_in_at_most_two_hops(monkeypatch):
    """With a session cookie (a browser's), every process_request and process_view in one
    hop, every process_response in another (Django's async path took one per hook: 15
    here, counted the same way)."""
    start, body, hops = _run(_get("/v1/models", monkeypatch, headers=[(b"cookie", b"sessionid=abc")]))
    assert start["status"] == 401
    assert json.loads(body)["error"]["code"] == "missing_api_key"
    headers = _headers(start)
    assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
    assert "BaseHandler.get_response" not in hops
    assert _middleware_hops(hops) == ["FlatMiddleware.before", "FlatMiddleware.after"], hops


def test_an_api_clients_request_runs_the_middleware_on_the_event_loop(monkeypatch):
    """No session cookie: the hooks cannot reach the database, so no hop for them (an
    error answer's response hooks still hop: Django logs it there)."""
    start, body, hops = _run(_get("/v1/models", monkeypatch))
    assert start["status"] == 401 and _headers(start)["x-frame-options"] == "DENY"
    assert _middleware_hops(hops) == ["FlatMiddleware.after"], hops

    from django.http import JsonResponse

    from chatsite.tenancy.request_context import current_request

    seen = []

    async def view(request, *args, **kwargs):
        seen.append(current_request() is request)
        return JsonResponse({"ok": True})

    _every_url_is(monkeypatch, view)
    start, body, hops = _run(_get("/v1/models", monkeypatch))
    assert start["status"] == 200 and json.loads(body) == {"ok": True}
    headers = _headers(start)
    assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
    assert _middleware_hops(hops) == [], hops
    assert seen == [True]  # RequestContextMiddleware's process_request ran before the view


def test_an_exception_in_an_async_view_is_answered_and_passes_the_response_hooks(monkeypatch):
    async def raising(request, *args, **kwargs):
        raise RuntimeError("a bug in the view")

    _every_url_is(monkeypatch, raising)

    async def run():
        comm = ApplicationCommunicator(OneHopASGIHandler(), _scope("/v1/models"))
        await comm.send_input({"type": "http.request", "body": b""})
        start = await comm.receive_output(10)
        return start, (await comm.receive_output(10)).get("body", b"")

    start, body = _run(run())
    assert start["status"] == 500
    assert json.loads(body)["error"]["code"] == "server_error"  # ApiErrorMiddleware's process_response
    assert _headers(start)["x-frame-options"] == "DENY"  # and the others'


async def _login_page(handler) -> None:
    """GET /login/ through `handler`, to its end."""
    comm = ApplicationCommunicator(handler, _scope("/login/"))
    await comm.send_input({"type": "http.request", "body": b""})
    assert (await comm.receive_output(10))["status"] == 200
    await comm.receive_output(10)
    await comm.wait(10)


def test_a_request_runs_on_one_leased_thread_and_the_next_request_reuses_it():
    """Every thread-sensitive call of a request (its signals, the view) runs on one thread,
    as in Django; a request that ends gives its thread back: the next one runs there, with
    no thread started for it. Two requests at once hold two threads."""
    import threading

    from django.core.signals import request_finished, request_started

    seen: list[tuple[str, int]] = []

    def started(**kwargs):
        seen.append(("started", threading.get_ident()))

    def finished(**kwargs):
        seen.append(("finished", threading.get_ident()))

    async def run():
        handler = OneHopASGIHandler()
        await _login_page(handler)
        await _login_page(handler)
        sequential = list(seen)
        seen.clear()
        await asyncio.gather(_login_page(handler), _login_page(handler))
        concurrent = list(seen)
        seen.clear()
        await _login_page(handler)
        return sequential, concurrent, list(seen)

    request_started.connect(started)
    request_finished.connect(finished)
    try:
        sequential, concurrent, after = _run(run())
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)
    assert [what for what, _ in sequential] == ["started", "finished"] * 2, sequential
    assert len({ident for _, ident in sequential}) == 1, sequential  # one thread for both requests
    both = {ident for _, ident in concurrent}
    assert len(both) == 2, concurrent  # concurrent requests: a thread each
    assert sequential[0][1] in both, (sequential, concurrent)  # the first one's thread, and one more
    assert len({ident for _, ident in after}) == 1 and after[0][1] in both, after  # kept: no thread started


def test_threads_past_the_kept_number_end_after_a_burst(monkeypatch):
    import threading
    import time

    from django.core.signals import request_started

    from chatsite.edge import handler

    monkeypatch.setattr(handler, "IDLE_THREADS_KEPT", 2)
    burst: set[int] = set()

    def started(**kwargs):
        burst.add(threading.get_ident())

    async def run():
        handler = OneHopASGIHandler()
        await asyncio.gather(*(_login_page(handler) for _ in range(5)))
        return handler  # held: its kept threads live as long as it does

    request_started.connect(started)
    try:
        kept_by = _run(run())
    finally:
        request_started.disconnect(started)
    assert len(burst) == 5  # a thread each
    deadline = time.monotonic() + 5
    while len(burst & {t.ident for t in threading.enumerate()}) > 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # the ones past the kept number end once their request is done
    assert len(burst & {t.ident for t in threading.enumerate()}) == 2 and kept_by is not None


def _most_hops_at_once(monkeypatch, limit: int, requests: int = 5) -> int:
    """The most sync-view hops running at once while `requests` GET /login/ together, with
    WEB_THREADS = limit. Each hop is held until as many run as the limit lets (or every
    request has started one; at most 2 s), then 0.05 s more: a loaded machine's slow start
    of one hop cannot hide the overlap (a fixed hold did, once, in a clean-clone run), and
    hops past a broken limit show as more."""
    import threading
    import time

    from django.conf import settings

    monkeypatch.setitem(settings.CHATSITE, "WEB_THREADS", limit)
    turn, running, entered, most = threading.Condition(), [0], [0], [0]
    full = min(limit or requests, requests)
    original = OneHopASGIHandler._sync_request

    def held(self, request, scope):
        with turn:
            running[0] += 1
            entered[0] += 1
            most[0] = max(most[0], running[0])
            turn.notify_all()
            turn.wait_for(lambda: running[0] >= full or entered[0] == requests, timeout=2)
        time.sleep(0.05)
        with turn:
            running[0] -= 1
        return original(self, request, scope)

    monkeypatch.setattr(OneHopASGIHandler, "_sync_request", held)

    async def run():
        handler = OneHopASGIHandler()
        await asyncio.gather(*(_login_page(handler) for _ in range(requests)))

    _run(run())
    return most[0]


def test_at_most_the_set_number_of_request_threads_run_at_once(monkeypatch):
    """The others wait their turn (asleep, off the GIL the event loop needs); 0 lifts the limit."""
    assert _most_hops_at_once(monkeypatch, 1) == 1
    assert _most_hops_at_once(monkeypatch, 2) == 2
    assert _most_hops_at_once(monkeypatch, 0) == 5


def _api_call_hops(monkeypatch, response_for) -> tuple[int, bytes, list[str]]:
    """(status, body, hops) of an API client's request to an async view answering `response_for()`."""
    async def view(request, *args, **kwargs):
        return response_for()

    _every_url_is(monkeypatch, view)
    start, body, hops = _run(_get("/v1/models", monkeypatch))
    return start["status"], body, hops


def _streamed():
    from chatsite.edge.sse import SseResponse

    async def body():
        yield b"data: one\n\n"
        yield b"data: two\n\n"

    return SseResponse(body())


def test_an_api_clients_async_request_takes_no_hop_for_its_signals(monkeypatch):
    """request_started's receivers and the response's close (request_finished's) run on the
    event loop when Django's own receivers are all there are: Django's asend and its close
    gave each a thread hop. Both signals still reach their receivers."""
    from django.core import signals
    from django.http import JsonResponse

    sent = []

    def count_started(**kwargs):
        sent.append("started")

    def count_finished(**kwargs):
        sent.append("finished")

    status, body, hops = _api_call_hops(monkeypatch, lambda: JsonResponse({"ok": True}))
    assert status == 200 and json.loads(body) == {"ok": True}
    assert hops == [], hops
    status, body, hops = _api_call_hops(monkeypatch, _streamed)
    assert status == 200 and body == b"data: one\n\ndata: two\n\n"
    assert hops == [], hops

    # A receiver the handler does not know (another app's) may reach anything: Django's hops.
    signals.request_started.connect(count_started)
    signals.request_finished.connect(count_finished)
    try:
        status, body, hops = _api_call_hops(monkeypatch, _streamed)
    finally:
        signals.request_started.disconnect(count_started)
        signals.request_finished.disconnect(count_finished)
    assert status == 200 and sent == ["started", "finished"]
    assert len(hops) == 2, hops  # asend's sync receivers, and the close


def test_signals_hop_while_a_database_connection_is_open():
    """Django's receivers close an open connection that is broken or too old, a blocking
    call that must not run on the event loop: with one open, the receivers hop as in Django."""
    from django.core import signals
    from django.db import connection

    from chatsite.edge.signals import signal_inline

    connection.close()
    assert signal_inline(signals.request_finished, OneHopASGIHandler)
    connection.ensure_connection()
    try:
        assert not signal_inline(signals.request_finished, OneHopASGIHandler)
        assert not signal_inline(signals.request_started, OneHopASGIHandler)
    finally:
        connection.close()


def test_the_handler_is_read_against_the_django_it_runs_on():
    """chatsite/edge/handler.py keeps Django 5.2's ASGIHandler.handle, edited;
    chatsite/edge/flat_middleware.py runs Django's middleware chain flat and vets Django's
    own middleware for running on the event loop (DJANGO_INLINE_SAFE); chatsite/edge/signals.py
    reads a signal's live receivers through Django's private Signal._live_receivers: all were
    read against Django 5.2. On another Django this fails, so that they are read again
    (measured, the copy saves a third of a run's web instructions: docs/architecture.md)."""
    import django
    from django.conf import settings
    from django.core import signals

    from chatsite.edge.flat_middleware import DJANGO_INLINE_SAFE, FlatMiddleware

    assert django.VERSION[:2] == (5, 2), ("read chatsite/edge/handler.py and flat_middleware.py against this Django, "
                                         "then update this test")
    flat = FlatMiddleware()
    assert flat.inline_safe  # every middleware settings.MIDDLEWARE loads is vetted or says it is safe
    loaded = {f"{type(mw).__module__}.{type(mw).__qualname__}" for mw in flat.layers}
    assert loaded >= DJANGO_INLINE_SAFE & set(settings.MIDDLEWARE)
    sync, asynchronous = signals.request_finished._live_receivers(OneHopASGIHandler)  # signals.signal_inline's read
    assert isinstance(sync, list) and isinstance(asynchronous, list) and all(callable(r) for r in sync)


def test_an_api_clients_rendered_response_takes_no_hop_and_one_to_render_takes_one(monkeypatch):
    """A REST turn's response comes rendered from its view's hop (chatsite.api.async_path):
    its response hooks run on the event loop; a TemplateResponse still to render (its
    template may read files or the database) is rendered, and hooked, in a hop."""
    from rest_framework.renderers import JSONRenderer
    from rest_framework.response import Response

    def to_render():  # as a DRF view returns it
        response = Response({"ok": True})
        response.accepted_renderer, response.accepted_media_type = JSONRenderer(), "application/json"
        response.renderer_context = {}
        return response

    status, body, hops = _api_call_hops(monkeypatch, lambda: to_render().render())
    assert status == 200 and json.loads(body) == {"ok": True}
    assert _middleware_hops(hops) == [], hops

    status, body, hops = _api_call_hops(monkeypatch, to_render)
    assert status == 200 and json.loads(body) == {"ok": True}
    assert _middleware_hops(hops) == ["FlatMiddleware.after"], hops
