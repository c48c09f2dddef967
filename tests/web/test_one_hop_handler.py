"""The ASGI handler serves a sync view's request in one thread hop, through the same
middleware (chatsite/asgi_handler.py), and an async view on Django's async path."""
import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import SyncToAsync
from asgiref.testing import ApplicationCommunicator

from chatsite.asgi_handler import OneHopASGIHandler

pytestmark = pytest.mark.django_db(transaction=True)


def _run(coro):
    """asyncio.run on a thread of its own: the suite's browser tests leave an event loop
    running on the main thread (Playwright's sync API)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result(60)


def _scope(path: str) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 1), "server": ("testserver", 80)}


async def _get(path: str, monkeypatch) -> tuple[dict, bytes, list[str]]:
    """The response start, its body, and what was run through sync_to_async meanwhile."""
    hops, call = [], SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await call(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counted)
    comm = ApplicationCommunicator(OneHopASGIHandler(), _scope(path))
    await comm.send_input({"type": "http.request", "body": b""})
    start = await comm.receive_output(10)
    body = b""
    while True:
        message = await comm.receive_output(10)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    monkeypatch.setattr(SyncToAsync, "__call__", call)
    return start, body, hops


def test_a_sync_view_is_served_in_one_hop_with_every_middleware(monkeypatch):
    start, body, hops = _run(_get("/login/", monkeypatch))
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    assert start["status"] == 200 and b"<form" in body
    assert headers["x-frame-options"] == "DENY"  # XFrameOptionsMiddleware's process_response
    assert headers["x-content-type-options"] == "nosniff"  # SecurityMiddleware's
    assert "csrftoken" in headers.get("set-cookie", "")  # CsrfViewMiddleware's, for the login form
    # The request's one hop, besides request_started / request_finished's receivers.
    assert [h for h in hops if "get_response" in h] == ["BaseHandler.get_response"], hops
    assert len(hops) <= 3, hops


def test_an_async_view_keeps_the_async_path(monkeypatch):
    start, body, hops = _run(_get("/v1/models", monkeypatch))
    assert start["status"] == 401
    assert json.loads(body)["error"]["code"] == "missing_api_key"
    assert "BaseHandler.get_response" not in hops

