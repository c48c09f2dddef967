"""Limits before cost: an oversized body is refused before anything stores it, a
user's open event streams are capped (and a slot whose connection died frees
itself), and /metrics under production settings needs its token."""
import asyncio
import os
import select
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest
from django.conf import settings

from chatsite.edge.body_limit import BodyLimit
from tests import stack
from tests.security.helpers import OpenStream, open_run

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def _raw_request(live_url: str, head: str) -> socket.socket:
    host, port = live_url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(head.encode())
    return sock


def _read_response(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


@pytest.mark.parametrize("path", ["/api/chats/", "/v1/chat/completions", "/login/"])
def test_a_declared_oversized_body_is_refused_before_it_is_sent(web_url, path):
    sock = _raw_request(web_url, f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                  f"Content-Length: {10 * 1024 ** 3}\r\nExpect: 100-continue\r\n\r\n")
    start = time.monotonic()
    response = _read_response(sock)  # not one byte of the 10 GiB was sent
    took = time.monotonic() - start
    sock.close()
    assert response.startswith(b"HTTP/1.1 413 "), response[:200]
    assert b"100 Continue" not in response and b"request_too_large" in response and b"262144 bytes" in response
    print(f"413 for a declared 10 GiB body to {path} after {took * 1000:.1f} ms")


def test_a_chunked_body_is_cut_off_as_it_passes_the_limit(web_url):
    sock = _raw_request(web_url, "POST /api/chats/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (16 * 1024, b" " * 16 * 1024)
    sent, response = 0, b""
    while sent < 256 * LIMIT and not response:  # a body that never ends, unless the server refuses it
        readable, writable, _ = select.select([sock], [sock], [], 5)
        if readable:
            response = sock.recv(65536)
        elif writable:
            try:
                sock.sendall(chunk)
            except (ConnectionResetError, BrokenPipeError):  # it answered and closed (uvicorn does): read the answer
                response = sock.recv(65536)
                break
            sent += 16 * 1024
    sock.close()
    assert response.startswith(b"HTTP/1.1 413 "), (sent, response[:200])
    print(f"413 for a chunked body once {sent // 1024} KiB were sent, loopback buffers included "
          f"(limit {LIMIT // 1024} KiB)")


def test_the_asgi_layer_refuses_before_the_application_reads_past_the_limit():
    """Under another ASGI server (no Twisted in front), the outermost layer does it."""
    seen = {"called": False, "messages": []}

    async def app(scope, receive, send):
        seen["called"] = True
        while True:
            message = await receive()
            seen["messages"].append(message["type"])
            if message["type"] == "http.disconnect" or not message.get("more_body"):
                return

    async def call(headers, chunks):
        sent = []
        queue = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]

        async def receive():
            return queue.pop(0)

        async def send(message):
            sent.append(message)

        await BodyLimit(app)({"type": "http", "path": "/api/chats/", "headers": headers}, receive, send)
        return sent

    sent = asyncio.run(call([(b"content-length", str(LIMIT + 1).encode())], [b""]))
    assert sent[0]["status"] == 413 and not seen["called"]
    sent = asyncio.run(call([], [b"x" * (LIMIT // 2), b"x" * (LIMIT // 2), b"x", b"never read"]))
    assert sent[0]["status"] == 413 and seen["messages"] == ["http.request", "http.request", "http.disconnect"]
    sent = asyncio.run(call([], [b"x" * LIMIT]))
    assert sent == []  # at the limit: the application's to answer


@pytest.fixture(scope="module")
def capped_web(stack_env):
    """A daphne allowing 2 open streams per user, checking every second (slots expire after 4 s)."""
    env = {**stack_env, "CHATSITE_SSE_MAX_STREAMS_PER_USER": "2", "CHATSITE_SSE_REVOCATION_CHECK_SECONDS": "1"}
    proc, url = stack.start_web(env)
    yield env, proc, url
    proc.stop()


def _events(url, run, auth) -> str:
    return f"{url}/api/runs/{run.pk}/events"


def test_a_user_holds_at_most_the_cap_of_open_streams(capped_web, chat, auth):
    _, _, url = capped_web
    run = open_run(chat)
    with OpenStream(_events(url, run, auth), headers=auth) as first, OpenStream(_events(url, run, auth), headers=auth):
        refused = httpx.get(_events(url, run, auth), headers=auth, timeout=10)
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "4"
        assert refused.json()["error"]["code"] == "too_many_streams"
        assert first.status == 200
    # the two hung up: their slots were given back at once (long before they would expire)
    with OpenStream(_events(url, run, auth), headers=auth) as again, \
            OpenStream(_events(url, run, auth), headers=auth) as again_too:
        assert again.status == again_too.status == 200


def test_a_streamed_post_without_a_free_slot_answers_its_run_then_the_error(capped_web, chat, auth):
    """A streamed POST (`"stream": true`) needs a stream slot too; refused one, the run
    it admitted goes on (its events_url reads it once a slot is free)."""
    from chatsite import redis_keys
    from chatsite.redis_client import get_redis
    from chatsite.runs.models import GenerationRun
    from tests.api.helpers import stream_post

    _, _, url = capped_web
    run = open_run(chat)
    with OpenStream(_events(url, run, auth), headers=auth), OpenStream(_events(url, run, auth), headers=auth):
        status, _, events = stream_post(f"{url}/api/chats/", auth, {"model": chat.pool.name, "stream": True,
                                                                   "message": {"content": "b"}})
    assert status == 200 and [e.event for e in events] == ["run", "error"], events
    assert events[1].data["code"] == "too_many_streams"
    assert GenerationRun.objects.get(pk=events[0].data["run"]["id"]).status in ("queued", "running", "completed")
    # A streamed POST whose client hangs up gives its slot back: two streams open again.
    slots = redis_keys.sse_streams(chat.tenant_id, chat.owner_id)
    body = {"model": chat.pool.name, "stream": True, "message": {"content": "c"}}
    with httpx.stream("POST", f"{url}/api/chats/", json=body, headers=auth, timeout=10) as resp:
        assert resp.status_code == 200 and next(resp.iter_lines()).startswith("retry:")
        time.sleep(0.5)  # its stream is open (and holds a slot) by now; then the client hangs up
    end = time.monotonic() + 3  # the web notices the hang-up when it next reads the connection
    while True:
        with OpenStream(_events(url, run, auth), headers=auth) as a, OpenStream(_events(url, run, auth),
                                                                               headers=auth) as b:
            if a.status == b.status == 200:
                break
        assert time.monotonic() < end, ("the streamed POST's slot was not given back; slots (id, expiry) at "
                                        f"{time.time():.3f}: {get_redis().zrange(slots, 0, -1, withscores=True)}")
        time.sleep(0.2)


@pytest.mark.slow
def test_slots_of_a_web_process_that_died_free_themselves(capped_web, chat, auth):
    env, _, _ = capped_web
    proc, url = stack.start_web(env)
    run = open_run(chat)
    streams = [OpenStream(_events(url, run, auth), headers=auth).__enter__() for _ in range(2)]
    assert [s.status for s in streams] == [200, 200]
    proc.signal(signal.SIGKILL)  # no clean close: the two slots stay behind in Redis
    proc.popen.wait(10)
    proc.stop()
    _, _, other = capped_web
    assert httpx.get(_events(other, run, auth), headers=auth, timeout=10).status_code == 429
    start, status = time.monotonic(), 429
    while status == 429 and time.monotonic() - start < 15:
        time.sleep(0.5)
        with OpenStream(_events(other, run, auth), headers=auth, timeout=3) as s:
            status = s.status
    took = time.monotonic() - start
    assert status == 200, "the dead process's slots never expired"
    print(f"a dead process's slots freed after {took:.1f} s (slot ttl 4 s)")


def _production_env(stack_env, **extra) -> dict:
    return {**stack_env, "DJANGO_SETTINGS_MODULE": "chatsite.settings_production", "DJANGO_SECRET_KEY": "k" * 30
            + "abcdefghijklmnopqrstuvwxyz", "DJANGO_ALLOWED_HOSTS": "testserver", **extra}


def _scrape(env, header: str = "") -> str:
    code = ("import django; django.setup(); from django.test import Client; "
            f"r = Client().get('/metrics', secure=True, **({{'HTTP_AUTHORIZATION': {header!r}}} if {header!r} else {{}})); "
            "print(r.status_code, r.content.decode().splitlines()[0])")
    out = subprocess.run([sys.executable, "-c", code], cwd=stack.ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


@pytest.mark.slow
def test_metrics_need_a_token_under_production_settings(stack_env):
    env = {k: v for k, v in _production_env(stack_env).items() if k != "CHATSITE_METRICS_TOKEN"}
    assert _scrape(env).startswith("403 metrics are closed")
    with_token = {**env, "CHATSITE_METRICS_TOKEN": "scrape-me-" + os.urandom(8).hex()}
    assert _scrape(with_token).startswith("401 ")
    assert _scrape(with_token, "Bearer wrong").startswith("401 ")
    assert _scrape(with_token, f"Bearer {with_token['CHATSITE_METRICS_TOKEN']}").startswith("200 # HELP")
