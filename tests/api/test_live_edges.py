"""Edges that only the real server shows: daphne (DEBUG on, as in development),
the SSE consumer, raw bytes on the wire, and racing requests."""
import threading

import httpx
import pytest

from chatsite.chats.models import Message
from chatsite.runs.models import GenerationRun
from tests.runs.helpers import post_message, wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)


def _error(resp: httpx.Response, status: int) -> dict:
    assert resp.status_code == status, (resp.status_code, resp.text[:300])
    assert resp.headers["content-type"].startswith("application/json")
    return resp.json()["error"]


DJANGO_LEVEL = [("GET", "/api/nothing/", 404), ("GET", "/v1/nothing", 404), ("PUT", "/api/chats/", 405),
                ("DELETE", "/v1/models", 405), ("POST", "/api/chats", 404)]


def test_django_level_errors_are_json_even_with_debug_on(live_url, auth):
    for method, path, status in DJANGO_LEVEL:
        err = _error(httpx.request(method, live_url + path, headers=auth), status)
        assert err["message"] and ("type" in err) == path.startswith("/v1/")


RAW = [b'{"content": "caf\xe9"}', b'{"content": "a\x00b"}', b'{"content": "\xff\xfe"}']


def test_raw_bad_bytes_on_the_wire_are_400(live_url, auth, chat):
    headers = {**auth, "Content-Type": "application/json"}
    for raw in RAW:
        assert _error(httpx.post(f"{live_url}/api/chats/{chat.pk}/messages/", content=raw, headers=headers),
                      400)["code"] == "invalid_json"
        assert _error(httpx.post(f"{live_url}/v1/chat/completions", content=raw, headers=headers),
                      400)["code"] == "invalid_json"
    assert Message.objects.count() == 0


def test_one_megabyte_body_is_413(web_url, auth, chat):
    body = b'{"content": "' + b"x" * (1 << 20) + b'"}'
    for path in (f"/api/chats/{chat.pk}/messages/", "/v1/chat/completions"):
        resp = httpx.post(web_url + path, content=body, headers={**auth, "Content-Type": "application/json"},
                          timeout=30)
        assert "too large" in _error(resp, 413)["message"]
    assert Message.objects.count() == 0


MALFORMED_IDS = ["abc", "1-", "-1", "1-2-3", "99999999999999999999999-0", "99999999999999999999-0", "0-18446744073709551616",
                 "1.5-0", "🙂"]


def test_malformed_last_event_id_is_400(live_url, fake_workers, auth, chat):
    run = post_message(live_url, auth, chat.pk, max_tokens=5)
    url = f"{live_url}/api/runs/{run['id']}/events"
    for last_id in MALFORMED_IDS:
        err = _error(httpx.get(url, headers={**auth, "Last-Event-ID": last_id.encode()}), 400)
        assert err["code"] == "invalid_last_event_id" and "1700000000000-0" in err["message"]
        assert _error(httpx.get(url, params={"last_event_id": last_id}, headers=auth), 400)["code"] == \
            "invalid_last_event_id"
    wait_terminal(run["id"])


def test_sse_errors_are_json(live_url, auth, chat):
    assert _error(httpx.get(f"{live_url}/api/runs/999999/events", headers=auth), 404)["code"] == "not_found"
    assert _error(httpx.get(f"{live_url}/api/runs/1/events"), 401)["code"] == "not_authenticated"
    assert _error(httpx.post(f"{live_url}/api/runs/1/events", headers=auth), 405)


def test_repeated_post_with_one_idempotency_key_creates_one_run(live_url, fake_workers, auth, chat):
    headers = {**auth, "Idempotency-Key": "retry-me"}
    url = f"{live_url}/api/chats/{chat.pk}/messages/"
    first = httpx.post(url, json={"content": "hello"}, headers=headers, timeout=10)
    again = httpx.post(url, json={"content": "hello"}, headers=headers, timeout=10)
    assert first.status_code == again.status_code == 202
    assert first.json()["run"]["id"] == again.json()["run"]["id"]
    wait_terminal(first.json()["run"]["id"])
    later = httpx.post(url, json={"content": "hello"}, headers=headers, timeout=10)  # after it finished, too
    assert later.status_code == 202 and later.json()["run"]["id"] == first.json()["run"]["id"]
    assert GenerationRun.objects.count() == 1 and Message.objects.filter(chat=chat).count() == 2


def _at_once(parallel: int, url: str, body: dict, headers: dict) -> list[httpx.Response]:
    """The same POST from `parallel` threads, released together."""
    barrier = threading.Barrier(parallel)
    results = [None] * parallel

    def post(i):
        barrier.wait()
        results[i] = httpx.post(url, json=body, headers=headers, timeout=20)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


@pytest.mark.parametrize("parallel", [8])
def test_concurrent_posts_with_one_idempotency_key_create_one_run(live_url, fake_workers, auth, chat, parallel):
    headers = {**auth, "Idempotency-Key": "same-click-many-times"}
    results = _at_once(parallel, f"{live_url}/api/chats/{chat.pk}/messages/", {"content": "hello"}, headers)
    assert [r.status_code for r in results] == [202] * parallel, [r.text for r in results if r.status_code != 202]
    assert len({r.json()["run"]["id"] for r in results}) == 1
    assert GenerationRun.objects.count() == 1 and Message.objects.filter(chat=chat).count() == 2
    wait_terminal(results[0].json()["run"]["id"])


@pytest.mark.parametrize("parallel", [8])
def test_concurrent_chat_starts_with_one_idempotency_key_make_one_chat(live_url, fake_workers, auth, pool, parallel):
    """POST /api/chats/ with a first message, clicked many times at once: one chat, one run."""
    from chatsite.chats.models import Chat

    headers = {**auth, "Idempotency-Key": "start-once"}
    body = {"model": pool.name, "message": {"content": "hello"}}
    results = _at_once(parallel, f"{live_url}/api/chats/", body, headers)
    assert [r.status_code for r in results] == [201] * parallel, [r.text for r in results if r.status_code != 201]
    assert len({(r.json()["id"], r.json()["run"]["id"]) for r in results}) == 1
    assert Chat.objects.count() == 1 and GenerationRun.objects.count() == 1 and Message.objects.count() == 2
    wait_terminal(results[0].json()["run"]["id"])


def test_one_idempotency_key_on_two_chats_is_409(live_url, fake_workers, auth, chat, tenant, user, pool):
    from tests.factories import ChatFactory

    other = ChatFactory(tenant=tenant, owner=user, pool=pool)
    headers = {**auth, "Idempotency-Key": "k"}
    first = httpx.post(f"{live_url}/api/chats/{chat.pk}/messages/", json={"content": "a"}, headers=headers)
    assert first.status_code == 202
    err = _error(httpx.post(f"{live_url}/api/chats/{other.pk}/messages/", json={"content": "b"}, headers=headers),
                 409)
    assert err["field"] == "Idempotency-Key"
    assert GenerationRun.objects.count() == 1
    wait_terminal(first.json()["run"]["id"])
