"""The REST API for chats, messages, runs and models, in process (no workers)."""
import pytest

from chatsite.runs.access import token_grants
from chatsite.runs.models import GenerationRun
from tests.api.helpers import assert_error, key_client, row_counts
from tests.factories import ChatFactory, PoolFactory, queueing_pool

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(api_key):
    return key_client(api_key)


def test_chat_create_list_retrieve_rename_delete(client, pool):
    resp = client.post("/api/chats/", {"model": "flagship", "title": "  Loops   and lists "},
                       content_type="application/json")
    assert resp.status_code == 201, resp.content
    chat = resp.json()
    assert chat["title"] == "Loops and lists" and chat["model"] == "flagship"
    listed = client.get("/api/chats/").json()
    assert listed["count"] == 1 and [c["id"] for c in listed["results"]] == [chat["id"]]
    assert client.get(f"/api/chats/{chat['id']}/").json()["title"] == "Loops and lists"
    resp = client.patch(f"/api/chats/{chat['id']}/", {"title": "Renamed"}, content_type="application/json")
    assert resp.status_code == 200 and resp.json()["title"] == "Renamed"
    assert client.delete(f"/api/chats/{chat['id']}/").status_code == 204
    assert_error(client.get(f"/api/chats/{chat['id']}/"), 404, "not_found")


def test_chat_create_needs_a_known_model(client, pool):
    assert_error(client.post("/api/chats/", {}, content_type="application/json"), 400, field="model")
    err = assert_error(client.post("/api/chats/", {"model": "nope"}, content_type="application/json"),
                       400, "model_not_found", "model")
    assert "GET /api/models/" in err["message"]
    assert row_counts() == (0, 0, 0)


def test_chat_list_pages(client, tenant, user, pool):
    for _ in range(5):
        ChatFactory(tenant=tenant, owner=user, pool=pool)
    page = client.get("/api/chats/?limit=2&offset=2").json()
    assert page["count"] == 5 and len(page["results"]) == 2
    assert "offset=4" in page["next"] and "offset" not in page["previous"]
    last = client.get("/api/chats/?limit=2&offset=4").json()
    assert len(last["results"]) == 1 and last["next"] is None


@pytest.mark.parametrize("query", ["limit=0", "limit=201", "limit=abc", "offset=-1", "offset=99999999999999999999"])
def test_bad_page_parameters_are_400(client, chat, query):
    err = assert_error(client.get(f"/api/chats/?{query}"), 400)
    assert err["field"] == query.split("=")[0]
    assert_error(client.get(f"/api/chats/{chat.pk}/messages/?{query}"), 400)


def test_post_message_returns_202_with_the_run(client, chat):
    resp = client.post(f"/api/chats/{chat.pk}/messages/", {"content": "Hello", "max_tokens": 5, "seed": 4,
                                                           "stop": ["\n\n"], "tier": "batch"},
                       content_type="application/json")
    assert resp.status_code == 202, resp.content
    body = resp.json()
    run = GenerationRun.objects.get(pk=body["run"]["id"])
    assert run.max_tokens == 5 and run.seed == 4 and run.tier == "batch" and run.sampling["stop"] == ["\n\n"]
    path, _, token = body["run"]["events_url"].partition("?token=")
    assert path == f"/api/runs/{run.pk}/events" and token_grants(token, run.pk)
    assert body["user_message"]["content"] == "Hello" and body["assistant_message"]["run"]["id"] == run.pk
    messages = client.get(f"/api/chats/{chat.pk}/messages/").json()
    assert [m["role"] for m in messages["results"]] == ["user", "assistant"]
    assert client.get(f"/api/runs/{run.pk}/").json()["status"] == "queued"


def test_model_on_a_message_answers_that_turn_only(client, chat):
    queueing_pool("small")  # no worker runs here: its runs stay queued
    resp = client.post(f"/api/chats/{chat.pk}/messages/", {"content": "Hi", "model": "small"},
                       content_type="application/json")
    assert resp.status_code == 202, resp.content
    assert resp.json()["run"]["model"] == "small"
    chat.refresh_from_db()
    assert chat.pool.name == "flagship"  # the chat keeps its own model


def test_model_on_a_message_must_be_usable(client, chat):
    PoolFactory(name="disabled-pool", enabled=False)  # a name no other test's session fixture enables
    url = f"/api/chats/{chat.pk}/messages/"
    assert_error(client.post(url, {"content": "Hi", "model": "nope"}, content_type="application/json"),
                 400, "model_not_found", "model")
    assert_error(client.post(url, {"content": "Hi", "model": "disabled-pool"}, content_type="application/json"),
                 400, "model_disabled", "model")
    assert row_counts() == (1, 0, 0)


def test_patch_switches_the_chats_model(client, chat):
    PoolFactory(name="small")
    resp = client.patch(f"/api/chats/{chat.pk}/", {"model": "small"}, content_type="application/json")
    assert resp.status_code == 200 and resp.json()["model"] == "small"


def test_delete_is_refused_while_a_reply_is_generated(client, chat):
    client.post(f"/api/chats/{chat.pk}/messages/", {"content": "Hi"}, content_type="application/json")
    assert_error(client.delete(f"/api/chats/{chat.pk}/"), 409, "conflict")
    assert_error(client.post(f"/api/chats/{chat.pk}/messages/", {"content": "again"},
                             content_type="application/json"), 409, "conflict")


def test_cancel_a_queued_run(client, chat):
    run_id = client.post(f"/api/chats/{chat.pk}/messages/", {"content": "Hi"},
                         content_type="application/json").json()["run"]["id"]
    resp = client.post(f"/api/runs/{run_id}/cancel")
    assert resp.status_code == 200 and resp.json()["status"] == "cancelled"
    assert client.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"


def test_models_lists_the_tenants_pools_with_up(client, tenant, pool):
    other = PoolFactory(name="small")
    PoolFactory(name="retired", enabled=False)
    assert [m["id"] for m in client.get("/api/models/").json()] == ["flagship", "small"]
    tenant.allowed_pools.set([other])
    models = client.get("/api/models/").json()
    assert [m["id"] for m in models] == ["small"] and models[0]["up"] in (True, False)


def test_session_user_without_a_key_works_too(user, chat, password):
    from django.test import Client

    client = Client()
    assert client.login(username=user.username, password=password)
    assert client.get("/api/chats/").json()["count"] == 1


def test_no_credentials_is_401(db):
    from django.test import Client

    resp = Client().get("/api/chats/")
    assert_error(resp, 401, "not_authenticated")
    assert "Bearer" in resp["WWW-Authenticate"]
    assert_error(Client(HTTP_AUTHORIZATION="Bearer csk_000000000000_nope").get("/api/chats/"), 401)
