"""A queued message is sent under the credential that queued it, on the live stack (daphne,
fake-engine workers): an API key revoked, or a session signed out, after it was queued
refuses it when its turn comes (listed with the reason, no run made), as the door would
refuse a live request through it; the next message, sent through another credential, goes
on. The reply the queue waits for is in a pool no worker serves: the test ends it."""
import time

import httpx
import pytest

from chatsite.chats.models import QueuedMessage
from chatsite.runs.models import GenerationRun
from chatsite.tenancy.models import ApiKey
from tests.api.helpers import SERVED, end_ghost_reply, ghost_chat, queue_message, started_run
from tests.runs.helpers import post_message, wait_terminal
from tests.security.helpers import session_headers

pytestmark = pytest.mark.django_db(transaction=True)


def _refused(live_url, headers, chat_id, queued_id, timeout=20) -> dict:
    """The message as the queue's list shows it once refused."""
    end = time.monotonic() + timeout
    while True:
        listed = httpx.get(f"{live_url}/api/chats/{chat_id}/queue/", headers=headers, timeout=10).json()["results"]
        mine = [m for m in listed if m["id"] == queued_id]
        if mine and mine[0]["state"] == "refused":
            return mine[0]
        assert time.monotonic() < end, listed
        time.sleep(0.05)


def _queued_then_key_revoked(live_url, auth, chat) -> tuple[dict, dict]:
    """A reply in progress (no worker serves it), "two" queued behind it, then the key that
    queued it revoked: (the reply's run, the queued message)."""
    first = post_message(live_url, auth, chat.pk, "one")
    item = queue_message(live_url, auth, chat.pk, "two", **SERVED)
    key = ApiKey.objects.get(user=chat.owner)
    assert httpx.delete(f"{live_url}/api/keys/{key.pk}/", headers=auth, timeout=10).status_code == 200
    return first, item


def test_a_key_revoked_after_queueing_refuses_its_message_and_a_retry_sends_it_as_the_retrier(
        live_url, fake_workers, auth, chat):
    chat = ghost_chat(chat)
    first, item = _queued_then_key_revoked(live_url, auth, chat)
    end_ghost_reply(first["id"])
    wait_terminal(first["id"])
    browser = session_headers(chat.owner)
    refused = _refused(live_url, browser, chat.pk, item["id"])
    assert refused["error"] == "the API key it was sent with was revoked after it was queued"
    assert refused["run"] is None and refused["place"] is None
    assert GenerationRun.objects.filter(chat=chat).count() == 1  # no run made for it
    # Its owner, signed in, retries it: it goes as the session's now.
    retried = httpx.post(f"{live_url}/api/chats/{chat.pk}/queue/{item['id']}/retry", headers=browser, timeout=10)
    assert retried.status_code == 202, retried.text
    assert wait_terminal(started_run(item["id"]).pk).status == "completed"


def test_signing_out_after_queueing_refuses_that_sessions_message_and_the_next_goes_on(
        live_url, fake_workers, auth, chat):
    chat = ghost_chat(chat)
    first = post_message(live_url, auth, chat.pk, "one")
    browser = session_headers(chat.owner)
    by_session = queue_message(live_url, browser, chat.pk, "two", **SERVED)  # as the web page queues it
    by_key = queue_message(live_url, auth, chat.pk, "three", **SERVED)
    assert httpx.post(f"{live_url}/logout/", headers=browser, timeout=10).status_code == 302
    end_ghost_reply(first["id"])
    third = started_run(by_key["id"])  # the session's message was refused, the key's went on
    refused = _refused(live_url, auth, chat.pk, by_session["id"])
    assert refused["error"] == "the session it was sent from was signed out after it was queued"
    assert QueuedMessage.objects.get(pk=by_session["id"]).run_id is None
    assert third.user_message.content == "three" and third.user_message.parent_id == first["assistant_message"]
    assert GenerationRun.objects.filter(chat=chat).count() == 2
    assert wait_terminal(third.pk).status == "completed"


def test_a_message_sent_now_goes_as_its_sender_now_though_the_key_that_queued_it_was_revoked(
        live_url, fake_workers, auth, chat):
    chat = ghost_chat(chat)
    first, item = _queued_then_key_revoked(live_url, auth, chat)
    gone = httpx.post(f"{live_url}/api/chats/{chat.pk}/queue/{item['id']}/send-now", headers=auth, timeout=10)
    assert gone.status_code == 401  # the revoked key sends nothing now
    # Its owner, signed in, sends it now: it goes at once as the session's, the reply stopped.
    browser = session_headers(chat.owner)
    sent = httpx.post(f"{live_url}/api/chats/{chat.pk}/queue/{item['id']}/send-now", headers=browser, timeout=10)
    assert sent.status_code == 202 and sent.json()["state"] == "started", sent.text
    assert wait_terminal(first["id"]).finish_reason == "interrupted"
    assert wait_terminal(started_run(item["id"]).pk).status == "completed"
    assert QueuedMessage.objects.get(pk=item["id"]).credential.startswith("session")
