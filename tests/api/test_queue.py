"""Queued messages through the REST API, on the live stack (daphne, fake-engine workers):
`"queue": true` on a message POST to a busy chat, the queue's list, edit, withdraw and
send now; the replies start in order, one at a time, as the one before ends. The reply
the queue waits for is, where a test can, in a pool no worker serves (`ghost`): the test
ends it, so it is in progress whenever the test gets there, however loaded the machine;
the queued messages ask for the fake workers' pool."""
import time

import httpx
import pytest

from chatsite.chats.models import QueuedMessage
from chatsite.runs.models import GenerationRun
from tests.api.helpers import SERVED, end_ghost_reply, ghost_chat, post_body, queue_message, started_run
from tests.factories import ChatFactory, TenantFactory, UserFactory, queueing_pool
from tests.runs.helpers import post_message, wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)


def _wait_running(run_id: int, timeout=30) -> None:
    end = time.monotonic() + timeout
    while (status := GenerationRun.objects.get(pk=run_id).status) != "running":
        assert time.monotonic() < end, f"run {run_id} is still {status} after {timeout} s"
        time.sleep(0.02)


def test_messages_queued_over_rest_start_in_order_after_the_reply(live_url, fake_workers, auth, chat):
    chat = ghost_chat(chat)
    first = post_message(live_url, auth, chat.pk, "one")
    refused = post_body(live_url, auth, chat.pk, {"content": "no queue flag"})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "conflict"
    a = queue_message(live_url, auth, chat.pk, "two", **SERVED)
    b = queue_message(live_url, auth, chat.pk, "three", **SERVED)
    c = queue_message(live_url, auth, chat.pk, "four", **SERVED)
    assert (a["state"], a["place"], b["place"], c["place"]) == ("queued", 1, 2, 3) and a["run"] is None
    base = f"{live_url}/api/chats/{chat.pk}/queue/"
    edited = httpx.patch(f"{base}{b['id']}/", headers=auth, json={"content": "three, edited"})
    assert edited.status_code == 200 and edited.json()["content"] == "three, edited" and edited.json()["place"] == 2
    assert httpx.delete(f"{base}{c['id']}/", headers=auth).status_code == 204
    listed = httpx.get(base, headers=auth).json()["results"]
    assert [(m["id"], m["place"]) for m in listed] == [(a["id"], 1), (b["id"], 2)]

    end_ghost_reply(first["id"])
    ended = wait_terminal(first["id"])
    second = started_run(a["id"])
    assert second.user_message.parent_id == ended.assistant_message_id
    third = started_run(b["id"])
    assert wait_terminal(second.pk).finished_at <= third.queued_at  # one at a time
    assert third.user_message.content == "three, edited"
    assert third.user_message.parent_id == second.assistant_message_id
    assert wait_terminal(third.pk).status == "completed"
    assert GenerationRun.objects.filter(chat=chat).count() == 3  # the withdrawn one never ran
    assert httpx.get(base, headers=auth).json()["results"] == []
    late = httpx.patch(f"{base}{a['id']}/", headers=auth, json={"content": "too late"})
    assert late.status_code == 409 and "started" in late.json()["error"]["message"]


def test_send_now_interrupts_the_reply_and_the_message_runs_next(live_url, fake_workers, auth, chat):
    first = post_message(live_url, auth, chat.pk, "one", max_tokens=500, ignore_eos=True)
    a = queue_message(live_url, auth, chat.pk, "two", max_tokens=5)
    b = queue_message(live_url, auth, chat.pk, "three", max_tokens=5)
    _wait_running(first["id"])
    time.sleep(0.3)  # some tokens streamed
    resp = httpx.post(f"{live_url}/api/chats/{chat.pk}/queue/{b['id']}/send-now", headers=auth, timeout=10)
    assert resp.status_code == 202 and resp.json()["interrupted_run"] == first["id"]
    stopped = wait_terminal(first["id"])
    assert stopped.status == "cancelled" and stopped.finish_reason == "interrupted"
    assert 0 < stopped.completion_tokens < 500 and stopped.assistant_message.content
    steered = started_run(b["id"])
    assert steered.user_message.content == "three"
    assert steered.prompt_snapshot[-2] == {"role": "assistant", "content": stopped.assistant_message.content}
    assert wait_terminal(steered.pk).status == "completed"
    assert wait_terminal(started_run(a["id"]).pk).status == "completed"  # then the rest of the queue
    run = httpx.get(f"{live_url}/api/runs/{first['id']}/", headers=auth).json()
    assert run["finish_reason"] == "interrupted"


def test_queue_flag_on_an_idle_chat_sends_at_once(live_url, fake_workers, auth, chat):
    resp = post_body(live_url, auth, chat.pk, {"content": "hello", "queue": True, "max_tokens": 3})
    assert resp.status_code == 202 and resp.json()["run"]["id"] and not QueuedMessage.objects.exists()


def test_bad_queue_requests_are_4xx_naming_the_problem(live_url, auth, chat):
    from chatsite.runs.admission import run_submit
    from chatsite.runs.services import run_cancel

    chat = ghost_chat(chat)
    busy = run_submit(chat=chat, content="busy")  # until cancelled below
    bad = post_body(live_url, auth, chat.pk, {"content": "x", "queue": "yes"})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "queue"
    blank = post_body(live_url, auth, chat.pk, {"content": "  ", "queue": True})
    assert blank.status_code == 400 and blank.json()["error"]["field"] == "content"
    item = queue_message(live_url, auth, chat.pk, "two")
    base = f"{live_url}/api/chats/{chat.pk}/queue/"
    empty = httpx.patch(f"{base}{item['id']}/", headers=auth, json={"content": ""})
    assert empty.status_code == 400 and empty.json()["error"]["field"] == "content"
    assert httpx.delete(f"{base}999999/", headers=auth).status_code == 404
    other = TenantFactory()
    from chatsite.tenancy.services import api_key_create

    _, secret = api_key_create(user=UserFactory(tenant=other), tenant=other, name="other")
    stranger = {"Authorization": f"Bearer {secret}"}
    assert httpx.get(base, headers=stranger).status_code == 404
    assert httpx.delete(f"{base}{item['id']}/", headers=stranger).status_code == 404
    assert httpx.post(f"{base}{item['id']}/send-now", headers=stranger).status_code == 404
    mine_elsewhere = ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=chat.pool)
    assert httpx.delete(f"{live_url}/api/chats/{mine_elsewhere.pk}/queue/{item['id']}/",
                        headers=auth).status_code == 404
    assert QueuedMessage.objects.get(pk=item["id"]).state == "queued"
    run_cancel(run=busy)


def test_a_plain_send_while_messages_wait_joins_the_queue_and_other_turns_are_409(live_url, fake_workers, auth,
                                                                                   chat):
    # The moment between a reply's end and its queue's start: a message waits, no reply runs.
    done = wait_terminal(post_message(live_url, auth, chat.pk, "one", max_tokens=3)["id"])
    queueing_pool("ghost")  # "two" is answered there: in progress until the test ends it
    waiting = QueuedMessage.objects.create(chat=chat, tenant=chat.tenant, owner=chat.owner, content="two",
                                           position=0, request={"model": "ghost"})
    plain = post_body(live_url, auth, chat.pk, {"content": "three", "max_tokens": 3})  # no queue flag
    assert plain.status_code == 202, plain.text
    joined = plain.json()["queued_message"]
    # Behind "two", which its queuing started (once committed: nothing was being written).
    assert (joined["state"], joined["place"], joined["content"]) == ("queued", 1, "three")
    second = started_run(waiting.pk)
    assert second.user_message.content == "two" and second.user_message.parent_id == done.assistant_message_id
    regen = httpx.post(f"{live_url}/api/chats/{chat.pk}/messages/{done.assistant_message_id}/regenerate",
                       headers=auth, json={}, timeout=10)
    assert regen.status_code == 409 and regen.json()["error"]["code"] == "queue_waiting"
    end_ghost_reply(second.pk)
    third = started_run(joined["id"])
    assert wait_terminal(second.pk).finished_at <= third.queued_at  # nothing overtook the queue
    assert third.user_message.parent_id == second.assistant_message_id
    assert GenerationRun.objects.filter(chat=chat).count() == 3


def test_a_message_refused_when_its_turn_comes_is_listed_and_can_be_retried(live_url, fake_workers, auth, chat):
    from chatsite.quotas.models import TenantQuota

    chat = ghost_chat(chat)
    first = post_message(live_url, auth, chat.pk, "one")
    a = queue_message(live_url, auth, chat.pk, "two", **SERVED)
    quota = TenantQuota.objects.create(tenant=chat.tenant, token_budget=1)  # used up once `first` is settled
    end_ghost_reply(first["id"])
    base = f"{live_url}/api/chats/{chat.pk}/queue/"
    end = time.monotonic() + 20
    while (listed := httpx.get(base, headers=auth).json()["results"])[0]["state"] != "refused":
        assert time.monotonic() < end, listed
        time.sleep(0.05)
    assert listed[0]["id"] == a["id"] and listed[0]["place"] is None and "budget" in listed[0]["error"]
    assert httpx.post(f"{base}{a['id']}/send-now", headers=auth).status_code == 409  # retried, not sent now
    quota.delete()
    retried = httpx.post(f"{base}{a['id']}/retry", headers=auth)
    assert retried.status_code == 202 and retried.json()["error"] == ""
    assert wait_terminal(started_run(a["id"]).pk).status == "completed"
    assert httpx.get(base, headers=auth).json()["results"] == []
    assert httpx.post(f"{base}{a['id']}/retry", headers=auth).status_code == 409


def test_a_repeated_keyed_post_to_a_busy_chat_answers_its_queued_message_and_counts_nothing_more(
        live_url, auth, chat):
    from chatsite.quotas.models import TenantQuota
    from chatsite.quotas.selectors import quota_allowances
    from chatsite.runs.services import run_cancel

    if (left := 60 - time.time() % 60) < 15:  # the rate counts per clock minute: all of it in one
        time.sleep(left + 0.1)
    TenantQuota.objects.create(tenant=chat.tenant, requests_per_minute=3)
    chat = ghost_chat(chat)
    first = post_message(live_url, auth, chat.pk, "one")  # 1
    keyed, body = {**auth, "Idempotency-Key": "queued-once"}, {"content": "two", "queue": True, **SERVED}
    queued = post_body(live_url, keyed, chat.pk, body)  # 2
    assert queued.status_code == 202, queued.text
    item = queued.json()["queued_message"]
    assert quota_allowances(chat.tenant).requests.remaining == 1
    for _ in range(3):  # each over the limit if it counted
        again = post_body(live_url, keyed, chat.pk, body)
        assert again.status_code == 202, again.text
        assert (again.json()["queued_message"]["id"], again.json()["queued_message"]["place"]) == (item["id"], 1)
    reused = post_body(live_url, keyed, chat.pk, {**body, "content": "another"})
    assert reused.status_code == 409 and reused.json()["error"]["code"] == "idempotency_key_reused"
    assert quota_allowances(chat.tenant).requests.remaining == 1  # none of them counted
    assert QueuedMessage.objects.filter(chat=chat).count() == 1
    run_cancel(run=GenerationRun.objects.get(pk=first["id"]))
