"""One error shape for every 4xx/5xx under /api/ (and OpenAI's under /v1/), in process."""
import pytest
from django.test import Client, override_settings
from django.urls import include, path

from tests.api.helpers import assert_error, assert_openai_error, key_client, row_counts

pytestmark = pytest.mark.django_db


def _boom(request):
    raise RuntimeError("a bug")


urlpatterns = [  # a URLconf with a view that fails, to see a 500 leave in the right shape
    path("api/boom/", _boom),
    path("v1/boom", _boom),
    path("", include("chatsite.urls")),
]


@pytest.fixture
def client(api_key):
    return key_client(api_key)


def test_unknown_endpoint_is_json_404(client):
    err = assert_error(client.get("/api/nothing-here/"), 404, "not_found")
    assert "/api/nothing-here/" in err["message"]
    assert_openai_error(client.get("/v1/nothing-here"), 404, "not_found")


def test_missing_trailing_slash_says_which_url_to_use(client):
    err = assert_error(client.post("/api/chats", {"model": "flagship"}, content_type="application/json"), 404)
    assert "did you mean /api/chats/" in err["message"]


def test_wrong_method_is_json_405(client, chat):
    err = assert_error(client.put("/api/chats/", {}, content_type="application/json"), 405, "method_not_allowed")
    assert "GET or POST" in err["message"]
    assert_error(client.get(f"/api/runs/{chat.pk}/cancel"), 405)
    resp = client.get("/v1/chat/completions")
    assert_openai_error(resp, 405, "method_not_allowed")
    assert resp["Allow"] == "POST"


@override_settings(ROOT_URLCONF=__name__)
def test_a_bug_is_json_500(api_key):
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {api_key}")
    err = assert_error(client.get("/api/boom/"), 500, "server_error")
    assert "a bug" not in err["message"]
    assert_openai_error(client.get("/v1/boom"), 500, "server_error")["type"] == "server_error"


@pytest.mark.parametrize("url", ["/api/chats/", "/v1/chat/completions"])
def test_one_megabyte_body_is_413(client, pool, url):
    resp = client.post(url, b'{"model": "' + b"x" * (1 << 20) + b'"}', content_type="application/json")
    assert resp.status_code == 413
    message = resp.json()["error"]["message"]
    assert "too large" in message and "262144" in message
    assert row_counts() == (0, 0, 0)


RAW_BODIES = [
    ("invalid UTF-8", b'{"content": "caf\xe9"}', "UTF-8"),
    ("truncated UTF-8", b'{"content": "\xf0\x9f"}', "UTF-8"),
    ("raw NUL byte", b'{"content": "a\x00b"}', "not valid JSON"),
    ("NUL outside strings", b'{"content": "hi"}\x00', "not valid JSON"),
    ("not JSON", b"content=hi", "not valid JSON"),
    ("truncated JSON", b'{"content": "hi"', "not valid JSON"),
    ("NaN", b'{"content": "hi", "temperature": NaN}', "NaN"),
    ("deep nesting", b"[" * 100000 + b"]" * 100000, "not valid JSON"),
]


@pytest.mark.parametrize("name, raw, words", RAW_BODIES, ids=[b[0] for b in RAW_BODIES])
def test_raw_bodies_are_400_not_500(client, chat, name, raw, words):
    err = assert_error(client.post(f"/api/chats/{chat.pk}/messages/", raw, content_type="application/json"),
                       400, "invalid_json")
    assert words in err["message"]
    err = assert_openai_error(client.post("/v1/chat/completions", raw, content_type="application/json"),
                              400, "invalid_json")
    assert words in err["message"]
    assert row_counts() == (1, 0, 0)


@pytest.mark.parametrize("body", [b"[]", b'"hi"', b"null", b"17"])
def test_body_must_be_an_object(client, chat, body):
    assert_error(client.post(f"/api/chats/{chat.pk}/messages/", body, content_type="application/json"), 400)
    assert_openai_error(client.post("/v1/chat/completions", body, content_type="application/json"), 400)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_non_json_content_type_is_415(client, chat, content_type):
    resp = client.generic("POST", f"/api/chats/{chat.pk}/messages/", b"content=hi", content_type=content_type)
    err = assert_error(resp, 415, "unsupported_media_type")
    assert "application/json" in err["message"]
    resp = client.generic("POST", "/v1/chat/completions", b"content=hi", content_type=content_type)
    assert_openai_error(resp, 415)


def test_openai_auth_errors(db):
    err = assert_openai_error(Client().get("/v1/models"), 401, "missing_api_key")
    assert "Bearer" in err["message"] and err["type"] == "authentication_error"
    assert_openai_error(Client(HTTP_AUTHORIZATION="Bearer nope").post("/v1/chat/completions", {},
                                                                      content_type="application/json"),
                        401, "invalid_api_key")


def test_errors_stay_json_and_specific_when_a_browser_asks_for_html(client, chat):
    resp = client.get("/api/chats/999999/", HTTP_ACCEPT="text/html")
    assert assert_error(resp, 404, "not_found")["message"] == "no such chat"
    resp = client.post(f"/api/chats/{chat.pk}/messages/", {"content": ""}, content_type="application/json",
                       HTTP_ACCEPT="text/html,application/xhtml+xml")
    assert "content must not be empty" in assert_error(resp, 400, field="content")["message"]
    assert client.get("/api/chats/", HTTP_ACCEPT="text/html").status_code == 200  # the browsable API stays
