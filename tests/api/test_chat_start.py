"""POST /api/chats/ with `message`: a chat and its first message in one request, in process (no workers)."""
import pytest

from chatsite.chats.models import Chat
from chatsite.runs.models import GenerationRun
from tests.api.helpers import assert_error, key_client, row_counts
from tests.factories import ChatFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(api_key):
    return key_client(api_key)


def start(client, body: dict, key: str | None = None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post("/api/chats/", body, content_type="application/json", **headers)


def test_one_request_makes_the_chat_its_message_and_the_run(client, pool, user):
    resp = start(client, {"model": "flagship", "system_prompt": "Answer briefly.", "temperature": 0.4,
                          "message": {"content": "What does  a for loop do?", "max_tokens": 7, "seed": 3,
                                      "tier": "batch"}})
    assert resp.status_code == 201, resp.content
    body = resp.json()
    chat = Chat.objects.get(pk=body["id"])
    assert chat.owner_id == user.pk and chat.listed and chat.system_prompt == "Answer briefly."
    assert body["model"] == "flagship" and body["title"] == chat.title == "What does a for loop do?"
    run = GenerationRun.objects.get(pk=body["run"]["id"])
    assert run.chat_id == chat.pk and run.status == "queued" and run.tier == "batch"
    assert run.max_tokens == 7 and run.seed == 3 and run.sampling["temperature"] == 0.4  # the chat's setting
    assert run.prompt_snapshot[0] == {"role": "system", "content": "Answer briefly."}
    assert body["user_message"]["content"] == "What does  a for loop do?"
    assert body["assistant_message"]["run"]["id"] == run.pk
    assert body["run"]["events_url"].startswith(f"/api/runs/{run.pk}/events?token=")
    path = client.get(f"/api/chats/{chat.pk}/messages/").json()["results"]
    assert [m["role"] for m in path] == ["user", "assistant"] and path[1]["id"] == chat.current_leaf_id
    # The chat goes on as any other: a second message follows the first reply (once it is done).
    GenerationRun.objects.filter(pk=run.pk).update(status="completed")
    again = client.post(f"/api/chats/{chat.pk}/messages/", {"content": "And a while loop?"},
                        content_type="application/json")
    assert again.status_code == 202, again.content
    assert again.json()["user_message"]["parent"] == body["assistant_message"]["id"]


def test_without_a_message_it_only_makes_the_chat(client, pool):
    resp = start(client, {"model": "flagship"})
    assert resp.status_code == 201 and "run" not in resp.json()
    assert row_counts() == (1, 0, 0)
    assert_error(start(client, {"model": "flagship", "stream": True}), 400, field="stream")  # nothing to stream
    assert row_counts() == (1, 0, 0)


@pytest.mark.parametrize("body, field, code", [
    ({"message": {"content": ""}}, "message.content", None),
    ({"message": {"content": "hi\x00"}}, "message.content", None),
    ({"message": {}}, "message.content", None),
    ({"message": "hi"}, "message", None),
    ({"message": {"content": "hi", "max_tokens": 10**6}}, "message.max_tokens", None),
    ({"message": {"content": "hi", "temperature": 3}}, "message.temperature", None),
    ({"message": {"content": "hi", "tier": "urgent"}}, "message.tier", None),
    ({"message": {"content": "hi", "priority": "high"}}, "message.priority", None),
    ({"message": {"content": "hi", "model": "nope"}}, "message.model", "model_not_found"),
    ({"message": {"content": "word " * 6300}}, "message.content", "context_length_exceeded"),
    ({"temperature": 9, "message": {"content": "hi"}}, "temperature", None),
    ({"model": "nope", "message": {"content": "hi"}}, "model", "model_not_found"),
])
def test_a_refused_start_writes_nothing_and_names_the_field(client, pool, body, field, code):
    assert_error(start(client, {"model": "flagship", **body}), 400, code, field)
    assert row_counts() == (0, 0, 0)


def test_a_repeat_with_the_same_key_gets_the_first_chat_and_run(client, pool):
    body = {"model": "flagship", "message": {"content": "hello"}}
    first, again = start(client, body, key="click-1"), start(client, body, key="click-1")
    assert first.status_code == again.status_code == 201, again.content
    assert (again.json()["id"], again.json()["run"]["id"]) == (first.json()["id"], first.json()["run"]["id"])
    assert row_counts() == (1, 2, 1)
    started = first.json()
    assert started["user_message"]["versions"] == [started["user_message"]["id"]]
    assert started["assistant_message"]["versions"] == [started["assistant_message"]["id"]]
    # Replayed after the first message was edited: its versions are read, not assumed.
    GenerationRun.objects.filter(pk=started["run"]["id"]).update(status="completed")
    edited = client.post(f"/api/chats/{started['id']}/messages/{started['user_message']['id']}/edit",
                         {"content": "hello again"}, content_type="application/json")
    assert edited.status_code == 202, edited.content
    replay = start(client, body, key="click-1").json()
    assert replay["user_message"]["versions"] == [started["user_message"]["id"], edited.json()["user_message"]["id"]]
    GenerationRun.objects.filter(pk=edited.json()["run"]["id"]).update(status="completed")
    changed = start(client, {**body, "message": {"content": "hello", "max_tokens": 3}}, key="click-1")
    assert_error(changed, 409, "idempotency_key_reused", "Idempotency-Key")
    other = start(client, body, key="click-2")
    assert other.json()["id"] != first.json()["id"] and row_counts() == (2, 6, 3)


def test_a_key_already_used_for_another_request_is_409(client, pool, tenant, user):
    chat = ChatFactory(tenant=tenant, owner=user, pool=pool)
    sent = client.post(f"/api/chats/{chat.pk}/messages/", {"content": "a"}, content_type="application/json",
                       HTTP_IDEMPOTENCY_KEY="k")
    assert sent.status_code == 202
    assert_error(start(client, {"model": "flagship", "message": {"content": "b"}}, key="k"), 409,
                 "idempotency_key_reused", "Idempotency-Key")
    assert row_counts() == (1, 2, 1)


def test_another_users_key_is_theirs_alone(client, pool, tenant):
    """An Idempotency-Key belongs to its owner: a colleague sending the same key and body
    gets a chat and run of their own, and learns nothing of the first user's."""
    from chatsite.tenancy.services import api_key_create
    from tests.factories import UserFactory

    body = {"model": "flagship", "message": {"content": "mine"}}
    first = start(client, body, key="shared")
    assert first.status_code == 201
    _, secret = api_key_create(user=UserFactory(tenant=tenant), tenant=tenant, name="other")
    theirs = start(key_client(secret), body, key="shared")
    assert theirs.status_code == 201 and "Idempotent-Replayed" not in theirs.headers
    assert theirs.json()["id"] != first.json()["id"] and theirs.json()["run"]["id"] != first.json()["run"]["id"]
    assert row_counts() == (2, 4, 2)
    again = start(client, body, key="shared")  # the first user's repeat is still theirs
    assert again.json()["run"]["id"] == first.json()["run"]["id"] and row_counts() == (2, 4, 2)


def test_a_start_over_the_tenants_limits_is_429_and_writes_nothing(client, pool, tenant):
    from chatsite.quotas.models import TenantQuota

    TenantQuota.objects.create(tenant=tenant, token_budget=5)  # less than the prompt and any reply
    resp = start(client, {"model": "flagship", "message": {"content": "Explain the for statement."}})
    assert resp.status_code == 429, resp.content
    assert resp.json()["error"]["message"] and "Retry-After" in resp.headers
    assert row_counts() == (0, 0, 0)
