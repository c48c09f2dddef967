"""Every stream goes out through one path (chatsite.runs.outlet), whatever surface
formats it: /v1 streams end when their key is revoked and count against the user's
open streams like /api ones; a password change ends the other sessions' streams and
the events tokens they minted (issue 44, items 6 and 7)."""
import threading
import time

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from chatsite.runs.models import GenerationRun
from chatsite.tenancy.models import ApiKey
from tests import stack
from tests.factories import queueing_pool
from tests.security.helpers import ENDS_WITHIN, OpenStream, events_url, open_run, session_headers

pytestmark = pytest.mark.django_db(transaction=True)

QUIET = "quiet-pool"  # no worker serves it: its runs stay queued and their streams open


class OpenPost(OpenStream):
    """OpenStream, for a POST whose answer streams (a /v1 call with "stream": true)."""

    def __init__(self, url: str, body: dict, headers: dict, timeout: float = 60):
        super().__init__(url, headers, timeout)
        self.json = body

    def _read(self) -> None:
        try:
            with httpx.stream("POST", self.url, json=self.json, headers=self.headers, timeout=self.timeout) as resp:
                self.status = resp.status_code
                self._socket = resp.extensions["network_stream"].get_extra_info("socket")
                for chunk in resp.iter_raw():
                    self.body += chunk
                    self.opened.set()
        except Exception as exc:
            self.error = exc
        finally:
            self.ended_at = time.monotonic()
            self.opened.set()
            self.ended.set()


@pytest.fixture
def quiet(tenant):
    return queueing_pool(QUIET)


def _chat_body(stream: bool = True) -> dict:
    return {"model": QUIET, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "stream": stream}


def _revoke(live_url, auth, user) -> float:
    key = ApiKey.objects.get(user=user, revoked_at__isnull=True)
    assert httpx.delete(f"{live_url}/api/keys/{key.pk}/", headers=auth, timeout=10).status_code == 200
    return time.monotonic()


def _ended_within(stream: OpenStream, name: str, revoked_at: float) -> None:
    stream.wait_end(ENDS_WITHIN)
    assert stream.ended.is_set(), f"{name}: still open {ENDS_WITHIN} s after the key was revoked"
    print(f"{name}: ended {stream.ended_at - revoked_at:.2f} s after the revocation")


def test_a_v1_chat_stream_ends_when_its_key_is_revoked(live_url, quiet, user, auth):
    with OpenPost(f"{live_url}/v1/chat/completions", _chat_body(), auth) as stream:
        assert stream.status == 200 and not stream.ended.is_set()
        _ended_within(stream, "/v1 chat completions stream", _revoke(live_url, auth, user))
    assert b'"code": "invalid_api_key"' in stream.body or b'"code":"invalid_api_key"' in stream.body, stream.body
    assert stream.body.rstrip().endswith(b"data: [DONE]")


def test_a_v1_responses_stream_and_its_reread_end_when_the_key_is_revoked(live_url, quiet, user, auth):
    body = {"model": QUIET, "input": "hi", "max_output_tokens": 5, "stream": True}
    with OpenPost(f"{live_url}/v1/responses", body, auth) as created:
        assert created.status == 200
        run = GenerationRun.objects.get(chat__owner=user, pool__name=QUIET)
        with OpenStream(f"{live_url}/v1/responses/resp_{run.pk}?stream=true", headers=auth) as reread:
            assert reread.status == 200 and not reread.ended.is_set()
            revoked_at = _revoke(live_url, auth, user)
            _ended_within(created, "POST /v1/responses stream", revoked_at)
            _ended_within(reread, "GET /v1/responses/{id}?stream=true", revoked_at)
    for stream in (created, reread):
        assert b"invalid_api_key" in stream.body, stream.body[-500:]


def test_a_v1_call_waiting_for_its_reply_is_refused_once_the_key_is_revoked(live_url, quiet, user, auth):
    answer = {}

    def call():
        answer["resp"] = httpx.post(f"{live_url}/v1/chat/completions", json=_chat_body(stream=False), headers=auth,
                                    timeout=60)

    waiting = threading.Thread(target=call)
    waiting.start()
    deadline = time.monotonic() + 20
    while not GenerationRun.objects.filter(chat__owner=user, pool__name=QUIET).exists():
        assert time.monotonic() < deadline, "the call's run was never admitted"
        time.sleep(0.1)
    _revoke(live_url, auth, user)
    waiting.join(ENDS_WITHIN + 5)
    assert not waiting.is_alive(), "the call still waits for its reply after its key was revoked"
    resp = answer["resp"]
    assert resp.status_code == 401 and resp.json()["error"]["code"] == "invalid_api_key", resp.text


@pytest.fixture(scope="module")
def capped_web(stack_env):
    """A daphne allowing 2 open streams per user, checking every second."""
    env = {**stack_env, "CHATSITE_SSE_MAX_STREAMS_PER_USER": "2", "CHATSITE_SSE_REVOCATION_CHECK_SECONDS": "1"}
    proc, url = stack.start_web(env)
    yield url
    proc.stop()


def test_v1_and_api_streams_share_the_users_cap_and_a_refused_v1_stream_admits_nothing(capped_web, quiet, chat,
                                                                                        user, auth):
    run = open_run(chat)
    with OpenStream(f"{capped_web}/api/runs/{run.pk}/events", headers=auth) as api, \
            OpenPost(f"{capped_web}/v1/chat/completions", _chat_body(), auth) as v1:
        assert api.status == v1.status == 200
        admitted = GenerationRun.objects.filter(chat__owner=user, pool__name=QUIET).count()
        refused = httpx.post(f"{capped_web}/v1/chat/completions", json=_chat_body(), headers=auth, timeout=10)
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_streams", refused.text
        assert refused.headers["Retry-After"]
        third = httpx.get(f"{capped_web}/api/runs/{run.pk}/events", headers=auth, timeout=10)
        assert third.status_code == 429
        # the refused stream wrote no run: a retry is not a second reply
        assert GenerationRun.objects.filter(chat__owner=user, pool__name=QUIET).count() == admitted
    with OpenPost(f"{capped_web}/v1/chat/completions", _chat_body(), auth) as again:
        assert again.status == 200  # both slots were given back when their clients hung up


@pytest.mark.slow
def test_a_password_change_ends_the_other_sessions_streams_and_their_tokens(live_url, chat):
    run = open_run(chat)
    other = session_headers(chat.owner)  # a session on another device
    token_url = events_url(live_url, other, run.pk)  # a token it minted
    with OpenStream(f"{live_url}/events", headers=other) as window, \
            OpenStream(f"{live_url}/api/runs/{run.pk}/events", headers=other) as by_cookie, \
            OpenStream(token_url) as by_token:
        assert window.status == by_cookie.status == by_token.status == 200
        user = get_user_model().objects.get(pk=chat.owner_id)
        user.set_password("a new password, long enough")
        user.save()
        changed_at = time.monotonic()
        for stream, name in ((window, "window events"), (by_cookie, "run events by cookie"),
                             (by_token, "run events by token")):
            stream.wait_end(ENDS_WITHIN)
            assert stream.ended.is_set(), f"{name}: still open {ENDS_WITHIN} s after the password change"
            print(f"{name}: ended {stream.ended_at - changed_at:.2f} s after the password change")
    assert httpx.get(token_url, timeout=10).status_code == 401
    # a session signed in after the change streams as before
    fresh = session_headers(user)
    with OpenStream(f"{live_url}/events", headers=fresh) as window:
        time.sleep(settings.CHATSITE["SSE_REVOCATION_CHECK_SECONDS"] + 0.5)
        assert window.status == 200 and not window.ended.is_set()
