"""Shared steps for the security tests: runs whose stream stays open, and an SSE
reader in a thread that records when the server ends the stream."""
import contextlib
import socket
import threading
import time

import httpx
from django.conf import settings
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client

from chatsite import redis_keys
from chatsite.chats.models import Message
from chatsite.redis_client import get_redis
from chatsite.runs.stream import codec
from chatsite.runs.models import GenerationRun

# How soon a revoked credential's streams end: the check interval, plus time for a loaded
# machine (the tests print the figure seen).
ENDS_WITHIN = settings.CHATSITE["SSE_REVOCATION_CHECK_SECONDS"] + 5


def open_run(chat, text: str = "so far") -> GenerationRun:
    """A queued run with one token in its stream and no worker for it: its event
    stream stays open (keep-alives) until something ends it."""
    user = Message.objects.create(chat=chat, role="user", content="question")
    reply = Message.objects.create(chat=chat, role="assistant", content="")
    run = GenerationRun.objects.create(tenant=chat.tenant, chat=chat, user_message=user, assistant_message=reply,
                                       pool=chat.pool, seed=1, max_tokens=50)
    get_redis().xadd(redis_keys.run_stream(run.pk), codec.token_fields(seq=0, n=1, text=text, attempt=1))
    return run


def events_url(live_url, headers, run_id) -> str:
    """The run's events URL with the short-lived token the API hands out to `headers`' credential."""
    resp = httpx.get(f"{live_url}/api/runs/{run_id}/", headers=headers, timeout=10)
    assert resp.status_code == 200, resp.text
    return live_url + resp.json()["events_url"]


def session_headers(user) -> dict:
    """The headers of a browser signed in as `user` (a session of Django's own making, and
    its CSRF pair), for httpx against the live stack."""
    client = Client()
    client.force_login(user)
    csrf = _get_new_csrf_string()
    return {"Cookie": f"sessionid={client.cookies['sessionid'].value}; csrftoken={csrf}", "X-CSRFToken": csrf}


class OpenStream:
    """GET an SSE URL in a thread; `opened` once the first bytes arrived, `ended_at`
    (time.monotonic()) once the server closed the stream."""

    def __init__(self, url: str, headers: dict | None = None, timeout: float = 60):
        self.url, self.headers, self.timeout = url, headers or {}, timeout
        self.status: int | None = None
        self.body = b""
        self.opened = threading.Event()
        self.ended = threading.Event()
        self.ended_at: float | None = None
        self.error: Exception | None = None
        self._socket: socket.socket | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> "OpenStream":
        self._thread.start()
        assert self.opened.wait(30), f"no answer from {self.url}: {self.error}"
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Hang up, as a browser tab closing does."""
        sock = self._socket
        if sock is not None and not self.ended.is_set():
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(10)

    def _read(self) -> None:
        try:
            with httpx.stream("GET", self.url, headers=self.headers, timeout=self.timeout) as resp:
                self.status = resp.status_code
                self._socket = resp.extensions["network_stream"].get_extra_info("socket")
                for chunk in resp.iter_raw():
                    self.body += chunk
                    self.opened.set()
        except Exception as exc:  # a stream still open at the read timeout ends here too
            self.error = exc
        finally:
            self.ended_at = time.monotonic()
            self.opened.set()
            self.ended.set()

    def wait_end(self, timeout: float) -> float | None:
        """Seconds from now until the server ended the stream, or None if it did not within `timeout`."""
        start = time.monotonic()
        if not self.ended.wait(timeout):
            return None
        return self.ended_at - start
