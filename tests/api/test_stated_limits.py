"""Each disagreement between the OpenAPI schema and the API that the property-based run
of issue 44 item 14 found, one test each: a request the schema forbids is refused with a
400 naming the field, and a limit the API enforces is stated by the schema (as a bound or a
pattern, or, when it depends on the data, in the words of the operation's 400)."""
import re

import httpx
import pytest
import yaml
from django.test import Client

from chatsite.runs.admission import run_submit
from chatsite.runs.models import GenerationRun
from tests.api.helpers import assert_error, assert_openai_error, key_client, row_counts

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    with django_db_blocker.unblock():
        return yaml.safe_load(Client().get("/api/schema/").content)


def _op(schema, path: str, method: str) -> dict:
    return schema["paths"][path][method]


def _param(op: dict, name: str) -> dict:
    return next(p["schema"] for p in op["parameters"] if p["name"] == name)


def _body(schema, op: dict) -> dict:
    ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return schema["components"]["schemas"][ref.rsplit("/", 1)[1]]


def _rules(op: dict) -> str:
    return op["responses"]["400"]["description"]


# --- requests the schema forbids, which were accepted ----------------------------------

def test_a_long_idempotency_key_is_refused_on_a_chat_without_a_message(schema, api_key, pool):
    assert _param(_op(schema, "/api/chats/", "post"), "Idempotency-Key")["maxLength"] == 200
    before = row_counts()
    resp = key_client(api_key).post("/api/chats/", {"model": "flagship"}, content_type="application/json",
                                    headers={"Idempotency-Key": "k" * 201})
    assert_error(resp, 400, "invalid_request", "Idempotency-Key")
    assert row_counts() == before
    ok = key_client(api_key).post("/api/chats/", {"model": "flagship"}, content_type="application/json",
                                  headers={"Idempotency-Key": "k" * 200})
    assert ok.status_code == 201


@pytest.mark.parametrize("name", ["model", "title", "pinned", "archived"])
def test_patch_refuses_null_where_the_schema_has_no_null(schema, api_key, chat, name):
    field = _body(schema, _op(schema, "/api/chats/{chat_id}/", "patch"))["properties"][name]
    assert not field.get("nullable")
    resp = key_client(api_key).patch(f"/api/chats/{chat.pk}/", {name: None}, content_type="application/json")
    assert_error(resp, 400, "invalid_request", name)
    chat.refresh_from_db()
    assert chat.pool.name == "flagship" and chat.pinned_at is None


def test_patch_still_clears_a_setting_with_null(schema, api_key, chat):
    assert _body(schema, _op(schema, "/api/chats/{chat_id}/", "patch"))["properties"]["temperature"]["nullable"]
    chat.temperature = 0.5
    chat.save()
    resp = key_client(api_key).patch(f"/api/chats/{chat.pk}/", {"temperature": None}, content_type="application/json")
    assert resp.status_code == 200 and resp.json()["temperature"] is None


@pytest.mark.parametrize("how", ["header", "query"])
def test_an_empty_last_event_id_is_refused(schema, live_url, chat, how):
    from chatsite.runs.access import events_token

    pattern = _param(_op(schema, "/api/runs/{run_id}/events", "get"), "Last-Event-ID")["pattern"]
    assert not re.search(pattern, "")
    run = run_submit(chat=chat, content="hello", max_tokens=4)
    # the events_url's token: the live server cannot see this test's uncommitted rows
    headers, params = {}, {"token": events_token(run)}
    if how == "header":
        headers["Last-Event-ID"] = ""
    else:
        params["last_event_id"] = ""
    resp = httpx.get(f"{live_url}/api/runs/{run.pk}/events", headers=headers, params=params, timeout=10)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "invalid_last_event_id"
    assert error["field"] == ("Last-Event-ID" if how == "header" else "last_event_id")


def test_the_last_event_id_pattern_is_the_one_the_stream_checks():
    from chatsite.runs.stream import codec

    for value, ok in (("1700000000000-0", True), (f"{2**64 - 1}-{2**64 - 1}", True), (f"{2**64}-0", False),
                      ("1-", False), ("", False), ("1-2\n", False)):
        assert codec.is_valid_stream_id(value) is ok, value
        assert bool(re.fullmatch(codec.STREAM_ID_PATTERN, value)) is ok, value


# --- limits the API enforces, now stated by the schema ---------------------------------

def test_model_names_state_their_pattern_and_an_unknown_one_in_words(schema, api_key, chat):
    from chatsite.pools.selectors import POOL_NAME_PATTERN

    op = _op(schema, "/api/chats/{chat_id}/messages/", "post")
    assert _body(schema, op)["properties"]["model"]["pattern"] == POOL_NAME_PATTERN
    assert "`model`" in _rules(op) and "model_not_found" in _rules(op)
    client = key_client(api_key)
    for name, code in (("no such model", "invalid_request"), ("x" * 51, "invalid_request"),
                       ("nosuchmodel", "model_not_found")):
        resp = client.post(f"/api/chats/{chat.pk}/messages/", {"content": "hi", "model": name},
                           content_type="application/json")
        assert_error(resp, 400, None, "model")
        if code == "model_not_found":
            assert resp.json()["error"]["code"] == code


def test_top_p_states_that_0_is_out(schema, api_key, chat):
    top_p = _body(schema, _op(schema, "/api/chats/{chat_id}/messages/", "post"))["properties"]["top_p"]
    assert (top_p["minimum"], top_p["exclusiveMinimum"], top_p["maximum"]) == (0, True, 1)
    client = key_client(api_key)
    resp = client.post(f"/api/chats/{chat.pk}/messages/", {"content": "hi", "top_p": 0}, content_type="application/json")
    assert_error(resp, 400, "invalid_request", "top_p")
    resp = client.post(f"/api/chats/{chat.pk}/messages/", {"content": "hi", "top_p": 1e-9},
                       content_type="application/json")
    assert resp.status_code == 202, resp.content


def test_search_states_that_q_needs_a_word(schema, api_key):
    q = _param(_op(schema, "/api/chats/search/", "get"), "q")
    assert q["minLength"] == 1 and q["maxLength"] == 200
    client = key_client(api_key)
    for text in ("", "!!!", "x" * 201):
        assert not (q["minLength"] <= len(text) <= q["maxLength"] and re.search(q["pattern"], text))
        assert_error(client.get("/api/chats/search/", {"q": text}), 400, "invalid_request", "q")
    assert client.get("/api/chats/search/", {"q": "é"}).status_code == 200


def test_the_chat_list_states_the_before_format(schema, api_key, chat):
    op = _op(schema, "/api/chats/", "get")
    pattern = _param(op, "before")["pattern"]
    client = key_client(api_key)
    for _ in range(2):
        client.post("/api/chats/", {"model": "flagship"}, content_type="application/json")
    first = client.get("/api/chats/", {"limit": 1, "before": "2999-01-01T00:00:00Z,1"})
    assert first.status_code == 200, first.content
    cursor = re.search(r"before=([^&]+)", first.json()["next"]).group(1)
    from urllib.parse import unquote

    assert re.fullmatch(pattern, unquote(cursor))  # the next link's cursor is what the schema describes
    for bad in ("yesterday,1", "2026-12-05T10:00:00Z", "2026-12-05T10:00:00Z,-1"):
        assert not re.search(pattern, bad)
        assert_error(client.get("/api/chats/", {"before": bad}), 400, "invalid_request", "before")
    # well formed, not in the calendar: said in words
    assert re.search(pattern, "2026-02-30T10:00:00Z,1") and "`before`" in _rules(op)
    assert_error(client.get("/api/chats/", {"before": "2026-02-30T10:00:00Z,1"}), 400, "invalid_request", "before")


def test_starting_after_states_its_range_and_needs_stream_in_words(schema, api_key):
    op = _op(schema, "/v1/responses/{response_id}", "get")
    after = _param(op, "starting_after")
    assert (after["minimum"], after["maximum"]) == (0, 10**9 - 1)
    assert "`starting_after` without `stream=true`" in _rules(op)
    resp = key_client(api_key).get("/v1/responses/resp_1", {"starting_after": "3"})
    assert_openai_error(resp, 400, "invalid_request", "starting_after")


@pytest.mark.parametrize("action, role", [("edit", "assistant"), ("regenerate", "user"), ("continue", "user")])
def test_the_roles_each_action_takes_are_in_words(schema, api_key, chat, action, role):
    op = _op(schema, "/api/chats/{chat_id}/messages/{message_id}/" + action, "post")
    assert "`message`" in _rules(op)
    run = run_submit(chat=chat, content="hello", max_tokens=4)
    GenerationRun.objects.filter(pk=run.pk).update(status="completed", finish_reason="stop")
    target = run.assistant_message_id if role == "assistant" else run.user_message_id
    body = {"content": "again"} if action == "edit" else {}
    resp = key_client(api_key).post(f"/api/chats/{chat.pk}/messages/{target}/{action}", body,
                                    content_type="application/json")
    assert_error(resp, 400, "invalid_request", "message")


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/v1/responses"])
def test_v1_bodies_are_json_only(schema, api_key, path):
    assert list(_op(schema, path, "post")["requestBody"]["content"]) == ["application/json"]
    resp = key_client(api_key).post(path, "model=flagship", content_type="application/x-www-form-urlencoded")
    assert resp.status_code in (400, 415), resp.content


def test_a_blank_message_and_one_stop_string_are_stated(schema, api_key, chat):
    props = _body(schema, _op(schema, "/api/chats/{chat_id}/messages/", "post"))["properties"]
    assert not re.search(props["content"]["pattern"], "  \n ") and not re.search(props["content"]["pattern"], "a\0")
    assert {s["type"] for s in props["stop"]["oneOf"]} == {"string", "array"}
    client = key_client(api_key)
    assert_error(client.post(f"/api/chats/{chat.pk}/messages/", {"content": "  \n "},
                             content_type="application/json"), 400, "invalid_request", "content")
    resp = client.post(f"/api/chats/{chat.pk}/messages/", {"content": "hi", "stop": "end"},
                       content_type="application/json")
    assert resp.status_code == 202, resp.content


def test_paging_bounds_are_stated(schema, api_key, chat):
    messages = _op(schema, "/api/chats/{chat_id}/messages/", "get")
    assert _param(messages, "before")["minimum"] == 0 and _param(messages, "after")["minimum"] == 0
    search_limit = _param(_op(schema, "/api/chats/search/", "get"), "limit")
    assert (search_limit["minimum"], search_limit["maximum"]) == (1, 50)
    items_limit = _param(_op(schema, "/v1/responses/{response_id}/input_items", "get"), "limit")
    assert (items_limit["minimum"], items_limit["maximum"]) == (1, 100)
    client = key_client(api_key)
    assert_error(client.get(f"/api/chats/{chat.pk}/messages/", {"before": "-1"}), 400, "invalid_request", "before")
    assert_error(client.get("/api/chats/search/", {"q": "a", "limit": "51"}), 400, "invalid_request", "limit")
