"""`"stream": true`: a message POST (and a chat's start) streams the reply in its own response."""
import httpx
import pytest

from chatsite.chats.models import Chat, Message
from chatsite.runs.models import GenerationRun
from tests.runs.helpers import wait_terminal
from tests.api.helpers import stream_post
from tests.sse import read_events, text_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_message_post_streams_its_run_then_the_reply(live_url, fake_workers, auth, chat):
    status, kind, events = stream_post(f"{live_url}/api/chats/{chat.pk}/messages/", auth,
                                       {"content": "Explain the for statement.", "max_tokens": 12,
                                        "ignore_eos": True, "stream": True})
    assert status == 200 and kind.startswith("text/event-stream"), events
    first, rest = events[0], events[1:]
    assert first.event == "run" and first.id is None
    run_id = first.data["run"]["id"]
    assert first.data["user_message"]["content"] == "Explain the for statement."
    assert first.data["run"]["events_url"].startswith(f"/api/runs/{run_id}/events?token=")
    assert rest[-1].event == "done" and all(e.event == "token" for e in rest[:-1])
    saved = wait_terminal(run_id)
    assert text_of(rest) == saved.assistant_message.content and rest[-1].data["usage"]["completion_tokens"] == 12
    # The same events, with the same ids, as GET events_url sends them.
    got = read_events(live_url + first.data["run"]["events_url"], headers=auth)
    assert [(e.id, e.event, e.data) for e in got] == [(e.id, e.event, e.data) for e in rest]


def test_a_chat_start_streams_and_a_dropped_client_resumes_with_get(live_url, fake_workers, auth, pool):
    body = {"model": pool.name, "stream": True,
            "message": {"content": "Explain the for statement.", "max_tokens": 30, "ignore_eos": True}}
    status, _, events = stream_post(f"{live_url}/api/chats/", auth, body, max_events=3)  # then it drops
    assert status == 200 and events[0].event == "run" and events[0].data["title"] == "Explain the for statement."
    assert [e.event for e in events[1:]] == ["token", "token"]
    run = events[0].data["run"]
    rest = read_events(live_url + run["events_url"], headers=auth, last_event_id=events[-1].id, timeout=20)
    saved = wait_terminal(run["id"])
    assert rest[-1].event == "done" and text_of(events) + text_of(rest) == saved.assistant_message.content
    assert Chat.objects.get().pk == events[0].data["id"]


def test_a_refused_streamed_post_is_a_json_error_and_writes_nothing(live_url, fake_workers, auth, chat):
    status, kind, body = stream_post(f"{live_url}/api/chats/{chat.pk}/messages/", auth,
                                     {"content": "", "stream": True})
    assert (status, kind, body["error"]["field"]) == (400, "application/json", "content")
    status, _, body = stream_post(f"{live_url}/api/chats/{chat.pk}/messages/", auth,
                                  {"content": "hi", "stream": "yes"})
    assert status == 400 and body["error"]["field"] == "stream" and "true" in body["error"]["message"]
    status, _, body = stream_post(f"{live_url}/api/chats/", auth,
                                  {"model": chat.pool.name, "stream": 1, "message": {"content": "hi"}})
    assert status == 400 and body["error"]["field"] == "stream"
    assert GenerationRun.objects.count() == 0 and Message.objects.count() == 0 and Chat.objects.count() == 1
