"""Idempotency-Key on POST /v1/chat/completions, against the live stack: an SDK retry
with the key gets the first call's completion and creates no second run."""
import threading

import httpx
import openai
import pytest

from chatsite.chats.models import Chat
from chatsite.runs.models import GenerationRun
from chatsite.tenancy.services import api_key_create
from tests.factories import TenantFactory, UserFactory
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "flagship", "messages": [{"role": "user", "content": "What does a for loop do?"}], "max_tokens": 20}


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    return v1_client(live_url, api_key)


def _post(live_url, api_key, body, key, stream=False):
    return httpx.post(f"{live_url}/v1/chat/completions", json={**body, "stream": stream}, timeout=60,
                      headers={"Authorization": f"Bearer {api_key}", "Idempotency-Key": key})


def test_an_sdk_retry_with_the_key_gets_the_first_completion(client, live_url, api_key):
    first = client.chat.completions.create(**BODY, extra_headers={"Idempotency-Key": "retry-1"})
    again = client.chat.completions.create(**BODY, extra_headers={"Idempotency-Key": "retry-1"})
    assert again.id == first.id and again.choices[0].message.content == first.choices[0].message.content != ""
    assert again.usage == first.usage
    raw = _post(live_url, api_key, BODY, "retry-1")  # a raw retry, as after a timeout
    assert raw.status_code == 200 and raw.json()["id"] == first.id
    assert raw.headers["idempotent-replayed"] == "true" and raw.headers["x-run-id"] == first.id.split("-")[1]
    assert GenerationRun.objects.count() == 1 and Chat.objects.count() == 1
    fresh = client.chat.completions.create(**BODY)  # no key: a new run
    assert fresh.id != first.id and GenerationRun.objects.count() == 2


def test_the_same_key_with_another_body_is_refused_by_name(client, live_url, api_key):
    first = _post(live_url, api_key, BODY, "body-1")
    assert first.status_code == 200 and "idempotent-replayed" not in first.headers
    other = _post(live_url, api_key, {**BODY, "max_tokens": 21}, "body-1")
    assert other.status_code == 409, other.text
    err = other.json()["error"]
    assert err["code"] == "idempotency_key_reused" and "Idempotency-Key" in err["message"]
    with pytest.raises(openai.ConflictError):
        client.chat.completions.create(**BODY, stream=True, extra_headers={"Idempotency-Key": "body-1"})
    too_long = _post(live_url, api_key, BODY, "k" * 201)
    assert too_long.status_code == 400 and "Idempotency-Key" in too_long.json()["error"]["message"]
    assert GenerationRun.objects.count() == 1


def test_a_streamed_retry_replays_the_same_text(client, live_url, api_key):
    def text(chunks):
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    first = list(client.chat.completions.create(**BODY, stream=True, extra_headers={"Idempotency-Key": "s-1"}))
    again = list(client.chat.completions.create(**BODY, stream=True, extra_headers={"Idempotency-Key": "s-1"}))
    run = wait_terminal(int(first[0].id.removeprefix("chatcmpl-")))
    assert again[0].id == first[0].id and text(again) == text(first) == run.assistant_message.content != ""
    assert GenerationRun.objects.count() == 1


def test_racing_retries_share_one_run(client, live_url, api_key):
    results = []

    def call():
        results.append(_post(live_url, api_key, BODY, "race-1"))

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status_code for r in results] == [200] * 4, [r.text for r in results]
    assert len({r.json()["id"] for r in results}) == 1
    assert GenerationRun.objects.count() == 1 and Chat.objects.count() == 1


def test_keys_belong_to_a_tenant(client, live_url, api_key):
    mine = _post(live_url, api_key, BODY, "shared-key").json()
    other = TenantFactory()
    _, secret = api_key_create(user=UserFactory(tenant=other), tenant=other, name="other")
    theirs = _post(live_url, secret, BODY, "shared-key")
    assert theirs.status_code == 200 and theirs.json()["id"] != mine["id"]
    assert GenerationRun.objects.filter(idempotency_key="shared-key").count() == 2


@pytest.mark.parametrize("path, body", [
    ("chat/completions", BODY),
    ("completions", {"model": "flagship", "prompt": "A for loop", "max_tokens": 20}),
])
def test_a_colleagues_same_key_and_body_gets_a_completion_of_their_own(live_url, fake_workers, pool, tenant, user,
                                                                       api_key, path, body):
    """Issue 44 item 4: an Idempotency-Key belongs to the key's owner. Another user of the
    same tenant sending the same key and body gets a new run, not the first user's reply,
    and nothing tells them the key was used."""
    _, colleague = api_key_create(user=UserFactory(tenant=tenant), tenant=tenant, name="colleague")

    def post(secret):
        return httpx.post(f"{live_url}/v1/{path}", json=body, timeout=60,
                          headers={"Authorization": f"Bearer {secret}", "Idempotency-Key": "shared-key"})

    mine, theirs = post(api_key), post(colleague)
    assert mine.status_code == theirs.status_code == 200, theirs.text
    assert "idempotent-replayed" not in theirs.headers
    assert theirs.json()["id"] != mine.json()["id"] and theirs.headers["x-run-id"] != mine.headers["x-run-id"]
    runs = GenerationRun.objects.filter(idempotency_key="shared-key")
    assert sorted(r.chat.owner_id for r in runs) == sorted([user.pk, UserFactory._meta.model.objects.get(
        api_keys__name="colleague").pk])
    again = post(api_key)  # the first user's own repeat still replays their completion
    assert again.headers["idempotent-replayed"] == "true" and again.json()["id"] == mine.json()["id"]
