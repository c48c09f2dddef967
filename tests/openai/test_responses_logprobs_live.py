"""The Responses API's logprobs: include ["message.output_text.logprobs"] with
top_logprobs, through the `openai` package against the live stack (fake engine):
each delta's tokens, the done events and the response object, the same on
retrieve, on a resumed stream and after the Redis stream expired."""
import json

import httpx
import pytest

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

INCLUDE = ["message.output_text.logprobs"]


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    return v1_client(live_url, api_key)


def _flat(logprobs) -> list:
    return [[t.token, t.logprob, [[a.token, a.logprob] for a in t.top_logprobs]] for t in logprobs]


def test_a_response_with_logprobs_has_every_tokens_figure(client):
    out = client.responses.create(model="flagship", input="Explain loops.", max_output_tokens=30, include=INCLUDE,
                                  top_logprobs=2)
    run = wait_terminal(int(out.id.removeprefix("resp_")))
    part = out.output[0].content[0]
    assert len(part.logprobs) == out.usage.output_tokens == run.completion_tokens > 0
    assert "".join(t.token for t in part.logprobs) == out.output_text == run.assistant_message.content
    assert all(t.logprob <= 0 and len(t.top_logprobs) == 2 and t.bytes == list(t.token.encode())
               for t in part.logprobs)
    assert _flat(part.logprobs) == run.logprobs
    assert client.responses.retrieve(out.id).output[0].content[0].logprobs == part.logprobs
    plain = client.responses.create(model="flagship", input="Explain loops.", max_output_tokens=5)
    assert plain.output[0].content[0].logprobs == []


def test_streamed_deltas_carry_their_tokens_and_the_end_carries_all(client, live_url, auth):
    events = list(client.responses.create(model="flagship", input="Explain loops.", max_output_tokens=30,
                                          include=INCLUDE, top_logprobs=1, stream=True))
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert all("".join(t.token for t in e.logprobs) == e.delta and e.logprobs for e in deltas)
    every = [t for e in deltas for t in e.logprobs]
    done = next(e for e in events if e.type == "response.output_text.done")
    completed = events[-1].response
    dump = [t.model_dump(mode="json") for t in every]
    assert [t.model_dump(mode="json") for t in done.logprobs] == dump  # the SDK's event and part types differ
    assert [t.model_dump(mode="json") for t in completed.output[0].content[0].logprobs] == dump
    assert len(every) == completed.usage.output_tokens
    rid = completed.id
    # Read again, and after its Redis stream expired: from Postgres, one delta with all of them.
    again = httpx.get(f"{live_url}/v1/responses/{rid}", params={"stream": "true"}, headers=auth, timeout=30)
    replayed = [json.loads(e.split("\ndata: ", 1)[1]) for e in again.text.split("\n\n") if "\ndata: " in e]
    assert [t for e in replayed if e["type"] == "response.output_text.delta" for t in e["logprobs"]] == dump
    get_redis().delete(redis_keys.run_stream(int(rid.removeprefix("resp_"))))
    expired = httpx.get(f"{live_url}/v1/responses/{rid}", params={"stream": "true"}, headers=auth, timeout=30)
    saved = [json.loads(e.split("\ndata: ", 1)[1]) for e in expired.text.split("\n\n") if "\ndata: " in e]
    one = [e for e in saved if e["type"] == "response.output_text.delta"]
    assert len(one) == 1 and one[0]["logprobs"] == dump
    assert [t.model_dump(mode="json") for t in client.responses.retrieve(rid).output[0].content[0].logprobs] == dump
