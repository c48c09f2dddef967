"""A pool with no live worker answers 503 model_unavailable with Retry-After in both
APIs' shapes and saves nothing, unless it queues while it scales from zero: then the
run is admitted and says it waits for a worker."""
import json

import pytest

from chatsite.counters import read_counter
from chatsite.runs.services.availability import NO_WORKER_RETRY_SECONDS
from tests.api.helpers import assert_error, assert_openai_error, key_client, row_counts
from tests.factories import ChatFactory, PoolFactory, queueing_pool
from tests.heartbeat import beat

pytestmark = pytest.mark.django_db


def _post(client, chat_id: int, **body):
    return client.post(f"/api/chats/{chat_id}/messages/", data=json.dumps({"content": "hello", **body}),
                       content_type="application/json")


@pytest.fixture
def cold_chat(tenant, user):
    return ChatFactory(tenant=tenant, owner=user, pool=PoolFactory(name="nw-cold"))


def test_rest_answers_503_with_retry_after_and_saves_nothing(api_key, cold_chat):
    before, refused = row_counts(), read_counter("unavailable").get("nw-cold", 0)
    resp = _post(key_client(api_key), cold_chat.pk)
    err = assert_error(resp, 503, "model_unavailable")
    assert "'nw-cold' has no worker running" in err["message"]
    assert resp["Retry-After"] == str(NO_WORKER_RETRY_SECONDS)
    assert row_counts() == before
    assert read_counter("unavailable")["nw-cold"] == refused + 1


def test_openai_api_answers_503_in_its_shape(api_key):
    PoolFactory(name="nw-openai")
    resp = key_client(api_key).post("/v1/chat/completions", content_type="application/json", data=json.dumps(
        {"model": "nw-openai", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}))
    err = assert_openai_error(resp, 503, "model_unavailable")
    assert err["type"] == "server_error"
    assert resp["Retry-After"] == str(NO_WORKER_RETRY_SECONDS)


def test_a_live_worker_admits_and_a_draining_or_silent_one_does_not(api_key, tenant, user):
    chat = ChatFactory(tenant=tenant, owner=user, pool=PoolFactory(name="nw-live"))
    client = key_client(api_key)
    beat("nw-live-1@host", "nw-live", draining=True)
    assert_error(_post(client, chat.pk), 503, "model_unavailable")
    beat("nw-live-2@host", "nw-live", age=4.0)  # three missed beats: gone
    assert_error(_post(client, chat.pk), 503, "model_unavailable")
    beat("nw-live-2@host", "nw-live")
    resp = _post(client, chat.pk)
    assert resp.status_code == 202, resp.content
    assert resp.json()["run"]["waiting_for_worker"] is False


def test_a_pool_that_queues_when_cold_admits_and_says_it_waits(api_key, tenant, user):
    chat = ChatFactory(tenant=tenant, owner=user, pool=queueing_pool("nw-queue"))
    client = key_client(api_key)
    resp = _post(client, chat.pk)
    assert resp.status_code == 202, resp.content
    run = resp.json()["run"]
    assert run["status"] == "queued" and run["waiting_for_worker"] is True
    assert client.get(f"/api/runs/{run['id']}/").json()["waiting_for_worker"] is True
    beat("nw-queue-1@host", "nw-queue", ready=False)  # its first worker is loading its engine
    assert client.get(f"/api/runs/{run['id']}/").json()["waiting_for_worker"] is False


def test_a_pool_seen_live_is_asked_again_a_second_later(api_key, tenant, user, monkeypatch):
    """A process asks Redis whether a pool has a live worker at most once a second while it has
    one; once that second is past, a pool whose worker went silent refuses again."""
    from chatsite.runs.services import availability

    clock = [1000.0]
    monkeypatch.setattr(availability.time, "monotonic", lambda: clock[0])
    chat = ChatFactory(tenant=tenant, owner=user, pool=PoolFactory(name="nw-memo"))
    client = key_client(api_key)
    beat("nw-memo-1@host", "nw-memo")
    assert _post(client, chat.pk).status_code == 202
    beat("nw-memo-1@host", "nw-memo", age=4.0)  # silent since
    other = ChatFactory(tenant=tenant, owner=user, pool=chat.pool)
    assert _post(client, other.pk).status_code == 202  # within the second: believed live
    clock[0] += availability.MEMO_SECONDS
    third = ChatFactory(tenant=tenant, owner=user, pool=chat.pool)
    assert_error(_post(client, third.pk), 503, "model_unavailable")
