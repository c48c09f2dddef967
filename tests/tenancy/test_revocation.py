"""Ending access ends the streams opened with it, over real HTTP (daphne): revoking
an API key, signing out, removing a membership, deleting a chat. A stream learns
it within SSE_REVOCATION_CHECK_SECONDS (3 s by default) from one Redis call per
check; another principal's streams go on."""
import time

import httpx
import pytest
from django.conf import settings

from chatsite.tenancy.models import ApiKey, Membership
from tests.runs.helpers import post_message, wait_terminal
from tests.security.helpers import ENDS_WITHIN, OpenStream, events_url, open_run, session_headers
from tests.sse import read_events

pytestmark = pytest.mark.django_db(transaction=True)


def _assert_ended(stream: OpenStream, name: str, revoked_at: float) -> float:
    stream.wait_end(ENDS_WITHIN)
    assert stream.ended.is_set(), f"{name}: still open {ENDS_WITHIN} s after the revocation"
    assert stream.status == 200 and stream.error is None, (name, stream.error)
    assert b"so far" in stream.body  # it was a live stream, ended cleanly
    took = stream.ended_at - revoked_at
    assert took < ENDS_WITHIN, (name, took)
    print(f"{name}: ended {took:.2f} s after the revocation")
    return took


def test_revoking_a_key_ends_the_streams_opened_with_it_and_its_tokens(live_url, chat, auth):
    run = open_run(chat)
    token_url = events_url(live_url, auth, run.pk)
    with OpenStream(token_url) as by_token, \
            OpenStream(f"{live_url}/api/runs/{run.pk}/events", headers=auth) as by_key:
        assert by_token.status == by_key.status == 200 and not by_key.ended.is_set()
        key = ApiKey.objects.get(user=chat.owner)
        assert httpx.delete(f"{live_url}/api/keys/{key.pk}/", headers=auth, timeout=10).status_code == 200
        revoked_at = time.monotonic()
        _assert_ended(by_key, "stream opened with the key", revoked_at)
        _assert_ended(by_token, "stream opened with a token issued through the key", revoked_at)
    assert httpx.get(token_url, timeout=10).status_code == 401  # the token is dead too


@pytest.mark.slow
def test_signing_out_ends_that_sessions_streams_and_only_those(live_url, chat, auth):
    run = open_run(chat)
    session = session_headers(chat.owner)
    token_url = events_url(live_url, session, run.pk)  # a token issued to the session, as the web page gets
    with OpenStream(f"{live_url}/api/runs/{run.pk}/events", headers=session) as by_cookie, \
            OpenStream(token_url) as by_token, \
            OpenStream(f"{live_url}/api/runs/{run.pk}/events", headers=auth) as by_key:
        resp = httpx.post(f"{live_url}/logout/", headers=session, timeout=10)
        assert resp.status_code == 302, resp.text[:300]
        revoked_at = time.monotonic()
        _assert_ended(by_cookie, "stream opened with the session", revoked_at)
        _assert_ended(by_token, "stream opened with the session's token", revoked_at)
        time.sleep(settings.CHATSITE["SSE_REVOCATION_CHECK_SECONDS"] + 0.5)  # one more check for everyone
        assert not by_key.ended.is_set()  # the same user's API key is another principal
    assert httpx.get(token_url, timeout=10).status_code == 401


@pytest.mark.slow
def test_removing_a_membership_ends_the_users_streams_and_adding_it_back_lets_new_ones_stay(live_url, chat, auth):
    run = open_run(chat)
    with OpenStream(f"{live_url}/api/runs/{run.pk}/events", headers=auth) as stream:
        Membership.objects.filter(user=chat.owner, tenant=chat.tenant).delete()  # as the admin's inline does
        _assert_ended(stream, "stream of a removed member", time.monotonic())
    assert httpx.get(f"{live_url}/api/runs/{run.pk}/events", headers=auth, timeout=10).status_code == 401
    Membership.objects.create(user=chat.owner, tenant=chat.tenant)
    with OpenStream(f"{live_url}/api/runs/{run.pk}/events", headers=auth) as again:
        time.sleep(settings.CHATSITE["SSE_REVOCATION_CHECK_SECONDS"] + 0.5)
        assert again.status == 200 and not again.ended.is_set()  # granted after the removal: not cut off


def test_an_events_token_stops_working_once_its_chat_is_deleted(live_url, fake_workers, chat, auth):
    run = post_message(live_url, auth, chat.pk, max_tokens=5)
    wait_terminal(run["id"])
    token_url = live_url + run["events_url"]
    assert read_events(token_url)[-1].event == "done"  # the finished run's stream is still in Redis
    assert httpx.delete(f"{live_url}/api/chats/{chat.pk}/", headers=auth, timeout=10).status_code == 204
    resp = httpx.get(token_url, timeout=10)
    assert resp.status_code == 401 and resp.json()["error"]["code"] == "not_authenticated"
    assert httpx.get(token_url, headers=auth, timeout=10).status_code == 404


def test_signing_out_ends_the_sessions_window_events_stream_too(live_url, chat):
    """The per-user event stream every open window follows (GET /events) is a stream of
    the session like a run's: signing out ends it within the check interval."""
    session = session_headers(chat.owner)
    with OpenStream(f"{live_url}/events", headers=session) as window:
        assert window.status == 200 and b"retry:" in window.body and not window.ended.is_set()
        assert httpx.post(f"{live_url}/logout/", headers=session, timeout=10).status_code == 302
        revoked_at = time.monotonic()
        window.wait_end(ENDS_WITHIN)
        assert window.ended.is_set(), f"the window's events stream is still open {ENDS_WITHIN} s after signing out"
        print(f"window events stream: ended {window.ended_at - revoked_at:.2f} s after signing out")
    assert httpx.get(f"{live_url}/events", headers=session, timeout=10).status_code == 401
