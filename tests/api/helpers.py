"""Shared steps for API tests: in-process clients, rows counted before and after, and
messages queued on the live stack behind a reply no worker takes."""
import time

import httpx
from django.test import Client

from chatsite.chats.models import Chat, Message, QueuedMessage
from chatsite.runs.models import GenerationRun
from chatsite.runs.services import run_finalize
from chatsite.runs.stream import codec
from tests.factories import ChatFactory, queueing_pool
from tests.runs.helpers import end_stream, xadd_tokens
from tests.sse import parse

SERVED = {"model": "flagship", "max_tokens": 5}  # the fake workers' pool


def key_client(secret: str) -> Client:
    """A Django test client that sends `Authorization: Bearer secret` on every request."""
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


def row_counts() -> tuple[int, int, int]:
    return Chat.objects.count(), Message.objects.count(), GenerationRun.objects.count()


def assert_error(resp, status: int, code: str | None = None, field: str | None = None) -> dict:
    """The response is `status` in the REST API's one error shape; returns its error object."""
    assert resp.status_code == status, resp.content[:500]
    assert resp["Content-Type"].startswith("application/json"), resp["Content-Type"]
    err = resp.json()["error"]
    assert set(err) <= {"code", "message", "field"} and err["message"], err
    if code is not None:
        assert err["code"] == code, err
    if field is not None:
        assert err.get("field") == field, err
    return err


def assert_openai_error(resp, status: int, code: str | None = None, param: str | None = None) -> dict:
    """The response is `status` in OpenAI's error shape; returns its error object."""
    assert resp.status_code == status, resp.content[:500]
    assert resp["Content-Type"].startswith("application/json"), resp["Content-Type"]
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"], err
    if code is not None:
        assert err["code"] == code, err
    if param is not None:
        assert err["param"] == param, err
    return err


def ghost_chat(chat):
    """A chat of the same owner whose replies no worker takes: they wait until the test ends them."""
    return ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=queueing_pool("ghost"))


def end_ghost_reply(run_id: int) -> None:
    """End a ghost reply as its worker would: its text, its terminal entry, its saving."""
    xadd_tokens(run_id, ["Uno"])
    end_stream(run_id, codec.done_fields(finish_reason="stop", prompt_tokens=3, completion_tokens=1))
    run_finalize(run_id=run_id)


def post_body(live_url, auth, chat_id, body):
    """A message POST of `body` over REST, its response whatever its status."""
    return httpx.post(f"{live_url}/api/chats/{chat_id}/messages/", headers=auth, json=body, timeout=10)


def queue_message(live_url, auth, chat_id, content, **extra) -> dict:
    """A message queued over REST (`"queue": true`); the queued message it answers with."""
    resp = post_body(live_url, auth, chat_id, {"content": content, "queue": True, **extra})
    assert resp.status_code == 202, resp.text
    return resp.json()["queued_message"]


def started_run(queued_id, timeout=30) -> GenerationRun:
    """The run a queued message started, once its turn came (TimeoutError if it did not)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        item = QueuedMessage.objects.get(pk=queued_id)
        if item.run_id is not None:
            return GenerationRun.objects.select_related("user_message", "assistant_message").get(pk=item.run_id)
        time.sleep(0.05)
    raise TimeoutError(f"queued message {queued_id} is still {item.state}")


def stream_post(url: str, headers: dict, body: dict, *, max_events: int | None = None):
    """(status, content type, events) of a streamed POST, read to its end or `max_events`."""
    events = []
    with httpx.stream("POST", url, json=body, headers=headers, timeout=30) as resp:
        if not resp.headers["content-type"].startswith("text/event-stream"):
            resp.read()
            return resp.status_code, resp.headers["content-type"], resp.json()
        for ev in parse(resp.iter_lines()):
            events.append(ev)
            if ev.event in ("done", "error") or (max_events is not None and len(events) >= max_events):
                break
        return resp.status_code, resp.headers["content-type"], events
