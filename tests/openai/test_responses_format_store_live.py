"""Responses structured output (`text.format`, and so the SDK's responses.parse) and
`store: false`, through the official `openai` package against the live stack
(fake-engine workers, whose constrained replies are values of their schema)."""
import json

import openai
import pytest
from pydantic import BaseModel

from chatsite import redis_keys
from chatsite.chats.models import Chat, Message
from chatsite.openai_api.models import ResponseRecord
from chatsite.openai_api.responses.services import responses_forget_ended
from chatsite.redis_client import get_redis
from chatsite.runs.models import GenerationRun
from chatsite.usage.selectors import usage_this_month
from tests.factories import PoolFactory
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)


class Forecast(BaseModel):
    city: str
    celsius: int
    windy: bool


class Week(BaseModel):  # nested models: the SDK's schema has $defs
    days: list[Forecast]


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    PoolFactory(name="small")
    return v1_client(live_url, api_key)


def _run(response_id: str) -> GenerationRun:
    return wait_terminal(int(response_id.removeprefix("resp_")))


@pytest.mark.parametrize("model", [Forecast, Week])
def test_responses_parse_gets_a_value_of_the_model(client, model):
    out = client.responses.parse(model="flagship", input="The weather in Oslo?", text_format=model,
                                 max_output_tokens=300)
    assert isinstance(out.output_parsed, model) and out.status == "completed"
    assert out.text.format.type == "json_schema" and out.text.format.name == model.__name__
    run = _run(out.id)
    assert run.sampling["response_format"]["type"] == "json_schema"  # constrained by the engine
    assert model.model_validate_json(run.assistant_message.content) == out.output_parsed
    with client.responses.stream(model="flagship", input="The weather in Oslo?", text_format=model,
                                 max_output_tokens=300) as stream:
        assert isinstance(stream.get_final_response().output_parsed, model)


def test_json_object_is_any_object(client):
    out = client.responses.create(model="flagship", input="Answer in JSON.", text={"format": {"type": "json_object"}},
                                  max_output_tokens=100)
    assert isinstance(json.loads(out.output_text), dict) and out.text.format.type == "json_object"
    assert client.responses.retrieve(out.id).text.format.type == "json_object"


def test_an_unstored_response_answers_then_is_gone(client):
    asked = dict(model="flagship", input="A secret question.", instructions="Be secret.", metadata={"k": "v"},
                 store=False, max_output_tokens=20, extra_headers={"Idempotency-Key": "secret-1"})
    out = client.responses.create(**asked)
    assert out.store is False and out.output_text != "" and out.metadata == {"k": "v"}
    run_id = int(out.id.removeprefix("resp_"))
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(out.id)
    for unreadable in (lambda: client.responses.input_items.list(out.id), lambda: client.responses.delete(out.id),
                       lambda: client.responses.create(model="flagship", input="And?", previous_response_id=out.id)):
        with pytest.raises(openai.NotFoundError):
            unreadable()
    # What is kept: the run's record and the usage billing reads; not its text.
    run = GenerationRun.objects.get(pk=run_id)
    assert run.status in ("completed", "cancelled") or run.finish_reason == "length"
    assert run.completion_tokens > 0 and run.prompt_tokens > 0 and run.prompt_snapshot == []
    assert set(Message.objects.filter(chat_id=run.chat_id).values_list("content", flat=True)) == {""}
    assert Chat.objects.get(pk=run.chat_id).title == ""
    record = ResponseRecord.objects.get(run_id=run_id)
    assert (record.instructions, record.metadata, record.stored) == (None, {}, False) and record.forgotten_at
    assert not get_redis().exists(redis_keys.run_stream(run_id))
    with pytest.raises(openai.ConflictError) as again:  # nothing kept to send again
        client.responses.create(**asked)
    assert "not stored" in again.value.message
    [usage] = usage_this_month(tenant=run.tenant).models  # the tenant's month, as GET /api/usage/ reads it
    assert (usage.prompt_tokens, usage.completion_tokens) == (run.prompt_tokens, run.completion_tokens)


def test_an_unstored_stream_is_forgotten_after_its_end_and_a_stored_conversation_keeps_its_own(client):
    stored = client.responses.create(model="flagship", input="Kept question.", max_output_tokens=20)
    events = list(client.responses.create(model="flagship", input="Private follow-up.", store=False,
                                          previous_response_id=stored.id, max_output_tokens=20, stream=True))
    final = events[-1].response
    assert final.store is False and final.output_text == "".join(
        e.delta for e in events if e.type == "response.output_text.delta")
    unstored = _run(final.id)
    contents = dict(Message.objects.filter(chat_id=unstored.chat_id).values_list("id", "content"))
    kept = _run(stored.id)
    assert contents[kept.user_message_id] == "Kept question." and contents[kept.assistant_message_id] != ""
    assert contents[unstored.user_message_id] == "" == contents[unstored.assistant_message_id]
    assert client.responses.retrieve(stored.id).output_text == stored.output_text


def test_the_sweep_forgets_an_unstored_response_whose_client_left(client, live_url, auth):
    import httpx

    with httpx.stream("POST", f"{live_url}/v1/responses", headers=auth, timeout=30, json={
            "model": "flagship", "input": "Left early.", "store": False, "stream": True, "max_output_tokens": 200,
            "ignore_eos": True}) as resp:
        run_id = int(resp.headers["x-run-id"])
        next(resp.iter_bytes())  # the opening events, then the client hangs up
    run = wait_terminal(run_id)
    assert run.completion_tokens == 200 and Message.objects.get(pk=run.assistant_message_id).content != ""
    assert responses_forget_ended() == 1 and responses_forget_ended() == 0  # once
    assert Message.objects.get(pk=run.assistant_message_id).content == ""
