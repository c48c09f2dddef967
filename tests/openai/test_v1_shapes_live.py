"""Shape details an OpenAI SDK reads, against the live stack (daphne, fake-engine workers):
the request id of every /v1 answer, any 64-bit seed, and what cancelling a response
that was not a background one answers."""
import re

import httpx
import openai
import pytest

from tests.factories import PoolFactory
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST_ID = re.compile(r"req_[0-9a-f]{32}")
ASK = [{"role": "user", "content": "Hi"}]


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    PoolFactory(name="small")
    return v1_client(live_url, api_key)


def test_every_answer_has_a_request_id_the_sdk_reads(client, live_url, auth):
    out = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=5)
    assert REQUEST_ID.fullmatch(out._request_id)
    stream = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=5, stream=True)
    assert REQUEST_ID.fullmatch(stream.response.headers["x-request-id"])
    stream.close()
    text = client.completions.create(model="flagship", prompt="Hi", max_tokens=5)
    response = client.responses.create(model="flagship", input="Hi", max_output_tokens=5)
    models = client.models.list()
    ids = {out._request_id, text._request_id, response._request_id, models._request_id}
    assert len(ids) == 4 and all(REQUEST_ID.fullmatch(i) for i in ids)  # one per request
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="flagship", messages=[])
    assert REQUEST_ID.fullmatch(refused.value.request_id)
    with pytest.raises(openai.AuthenticationError) as unauthenticated:
        openai.OpenAI(base_url=f"{live_url}/v1", api_key="csk_nope", max_retries=0).models.list()
    assert REQUEST_ID.fullmatch(unauthenticated.value.request_id)
    for answer in (httpx.get(f"{live_url}/v1/no-such-endpoint", headers=auth),
                   httpx.post(f"{live_url}/v1/chat/completions", headers=auth, content=b"x" * 300_000)):
        assert answer.status_code in (404, 413) and REQUEST_ID.fullmatch(answer.headers["x-request-id"])


@pytest.mark.parametrize("seed", [-1, -(2**63), 2**63 - 1])
def test_any_64_bit_seed_is_taken_and_repeats_its_reply(client, seed):
    a = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=12, seed=seed)
    b = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=12, seed=seed)
    assert a.choices[0].message.content == b.choices[0].message.content != ""
    assert wait_terminal(int(a.id.removeprefix("chatcmpl-"))).seed == seed


@pytest.mark.parametrize("seed", [2**63, -(2**63) - 1, 1.5, "7"])
def test_a_seed_outside_64_bits_is_a_400_naming_it(client, seed):
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="flagship", messages=ASK, max_tokens=5, seed=seed)
    assert refused.value.body["param"] == "seed"


def test_cancelling_a_finished_response_that_was_not_in_the_background_is_a_400(client):
    out = client.responses.create(model="flagship", input="Hi", max_output_tokens=100)
    assert out.status == "completed"
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.cancel(out.id)
    assert "background" in refused.value.message
    assert client.responses.retrieve(out.id).status == "completed"  # unchanged
    background = client.responses.create(model="flagship", input="Hi", max_output_tokens=100, background=True)
    wait_terminal(int(background.id.removeprefix("resp_")))
    assert client.responses.cancel(background.id).status == "completed"  # a finished background one: as it is
