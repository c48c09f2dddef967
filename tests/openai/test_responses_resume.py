"""Background responses and resumed streams: the run goes on without its client, and
GET /v1/responses/{id}?stream=true&starting_after=N sends the very bytes a full
stream had after event N, from Redis while the stream lives, from Postgres after."""
import json

import httpx
import openai
import pytest

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs.models import GenerationRun
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    return v1_client(live_url, api_key)


def _events(raw: bytes) -> list[bytes]:
    """The SSE events of a body, each with its blank line; keep-alive comments left out."""
    return [chunk + b"\n\n" for chunk in raw.split(b"\n\n") if chunk and not chunk.startswith(b":")]


def _seq(event: bytes) -> int:
    return json.loads(event.split(b"\ndata: ", 1)[1])["sequence_number"]


def _get_stream(live_url, auth, response_id: str, after: int | None = None) -> bytes:
    params = {"stream": "true"} | ({} if after is None else {"starting_after": str(after)})
    resp = httpx.get(f"{live_url}/v1/responses/{response_id}", params=params, headers=auth, timeout=30)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream"), resp.text
    return resp.content


def test_a_background_response_finishes_with_no_client_and_retrieve_returns_it(client):
    out = client.responses.create(model="flagship", input="Explain loops.", background=True, max_output_tokens=200,
                                  metadata={"job": "7"})
    assert out.status == "queued" and out.background is True and out.output == [] and out.usage is None
    run = wait_terminal(int(out.id.removeprefix("resp_")))  # nobody is attached to the run
    got = client.responses.retrieve(out.id)
    assert got.status == "completed" and got.background is True and got.metadata == {"job": "7"}
    assert got.output_text == run.assistant_message.content != ""
    assert got.usage.output_tokens == run.completion_tokens


def test_resume_after_any_event_is_the_rest_of_the_full_stream_byte_for_byte(client, live_url, auth):
    body = {"model": "flagship", "input": "Explain loops.", "stream": True, "background": True,
            "max_output_tokens": 200}
    prefix = []
    with httpx.stream("POST", f"{live_url}/v1/responses", json=body, headers=auth, timeout=30) as resp:
        assert resp.status_code == 200
        response_id = f"resp_{resp.headers['x-run-id']}"
        raw = b""
        for piece in resp.iter_bytes():
            raw += piece
            prefix = _events(raw[:raw.rfind(b"\n\n") + 2])
            if len(prefix) >= 7:
                break  # the client drops mid-reply; the background run goes on
    prefix = prefix[:7]
    assert [_seq(e) for e in prefix] == list(range(7))
    wait_terminal(int(response_id.removeprefix("resp_")))
    full = _events(_get_stream(live_url, auth, response_id))
    assert full[:7] == prefix  # the live stream and the replay agree on the bytes
    assert [_seq(e) for e in full] == list(range(len(full))) and len(full) > 12
    resumed = _events(_get_stream(live_url, auth, response_id, after=6))
    assert prefix + resumed == full
    for after in (0, 3, 4, len(full) // 2, len(full) - 2, len(full) - 1, len(full) + 5):
        assert _events(_get_stream(live_url, auth, response_id, after=after)) == full[after + 1:]
    # The SDK resumes the same way.
    sdk = list(client.responses.retrieve(response_id, stream=True, starting_after=len(full) - 3))
    assert [e.sequence_number for e in sdk] == [len(full) - 2, len(full) - 1]
    assert sdk[-1].type == "response.completed"
    assert sdk[-1].response.model_dump() == client.responses.retrieve(response_id).model_dump()


def test_a_stream_past_its_redis_ttl_is_read_back_from_postgres(client, live_url, auth):
    out = client.responses.create(model="flagship", input="Explain loops.", max_output_tokens=200)
    run = wait_terminal(int(out.id.removeprefix("resp_")))
    get_redis().delete(redis_keys.run_stream(run.pk))  # as the stream TTL does
    events = [json.loads(e.split(b"\ndata: ", 1)[1]) for e in _events(_get_stream(live_url, auth, out.id))]
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
    assert events[4]["delta"] == run.assistant_message.content == out.output_text  # the whole text in one delta
    assert events[-1]["response"] == client.responses.retrieve(out.id).model_dump(mode="json", exclude_unset=True)
    resumed = _events(_get_stream(live_url, auth, out.id, after=4))
    assert [_seq(e) for e in resumed] == [5, 6, 7, 8]


def test_bad_resume_parameters_are_400_by_name(client, live_url, auth):
    out = client.responses.create(model="flagship", input="Hi", background=True)
    url = f"{live_url}/v1/responses/{out.id}"
    for params, param in (({"starting_after": "3"}, "starting_after"),
                          ({"stream": "true", "starting_after": "-1"}, "starting_after"),
                          ({"stream": "true", "starting_after": "x"}, "starting_after"),
                          ({"stream": "maybe"}, "stream")):
        resp = httpx.get(url, params=params, headers=auth, timeout=10)
        assert resp.status_code == 400 and resp.json()["error"]["param"] == param, (params, resp.text)


def test_a_retry_with_the_same_idempotency_key_gets_the_first_response(client, live_url, auth):
    once = {"Idempotency-Key": "retry-1"}
    first = client.responses.create(model="flagship", input="Explain loops.", extra_headers=once)
    again = client.responses.create(model="flagship", input="Explain loops.", extra_headers=once)
    assert again.model_dump() == first.model_dump()
    background = client.responses.create(model="flagship", input="Explain loops.", extra_headers=once,
                                         background=True)
    assert background.id == first.id and background.status == first.status  # as it stands now, not queued
    # A streamed retry gets the same events, byte for byte.
    body = {"model": "flagship", "input": "Explain lists.", "stream": True}
    headers = {**auth, "Idempotency-Key": "retry-2"}
    streams = [httpx.post(f"{live_url}/v1/responses", json=body, headers=headers, timeout=30) for _ in range(2)]
    assert _events(streams[0].content) == _events(streams[1].content) != []
    assert streams[0].headers["x-run-id"] == streams[1].headers["x-run-id"]
    assert GenerationRun.objects.count() == 2
    # The same key for another request is refused, naming the header.
    with pytest.raises(openai.ConflictError) as info:
        client.responses.create(model="flagship", input="Something else.", extra_headers=once)
    assert "Idempotency-Key" in info.value.body["message"]
    assert GenerationRun.objects.count() == 2
