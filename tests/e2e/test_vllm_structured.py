"""Structured outputs on the real engine: a json_schema reply from /v1/chat/completions
parses and validates against its schema (vLLM structured outputs on the CPU build)."""
import json

import jsonschema
import openai
import pytest

from tests.conftest import VLLM_POOL
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.vllm]

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["capital", "in_europe"],
          "properties": {"capital": {"type": "string", "enum": ["Paris", "Rome", "Madrid", "Berlin"]},
                         "in_europe": {"type": "boolean"}}}


def test_a_json_schema_reply_parses_and_validates(live_url, vllm_pool, api_key):
    client = v1_client(live_url, api_key, timeout=180)
    out = client.chat.completions.create(
        model=VLLM_POOL, max_tokens=120, temperature=0.0,
        messages=[{"role": "user", "content": "What is the capital of France? Answer in JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "capital", "schema": SCHEMA,
                                                                "strict": True}})
    text = out.choices[0].message.content
    reply = json.loads(text)
    jsonschema.validate(reply, SCHEMA)
    run = wait_terminal(int(out.id.removeprefix("chatcmpl-")), timeout=120)
    assert run.status == "completed" and run.assistant_message.content == text
    assert run.sampling["response_format"] == {"type": "json_schema", "name": "capital", "schema": SCHEMA}


def _ask(client, schema: dict, **extra):
    return client.chat.completions.create(
        model=VLLM_POOL, max_tokens=24, temperature=0.0, messages=[{"role": "user", "content": "Say hello in JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}, **extra)


def test_the_pattern_that_stalled_a_pool_is_a_400_before_the_engine(live_url, vllm_pool, api_key):
    client = v1_client(live_url, api_key)
    stalling = {"type": "object", "properties": {"a": {"type": "string", "pattern": r"^(\w{1,99}\s?){1,999}$"}}}
    with pytest.raises(openai.BadRequestError) as info:  # issue 44 item 1: 10-20 s a token, every run waiting
        _ask(client, stalling)
    assert info.value.body["param"] == "response_format.json_schema.schema.properties.a.pattern"


def test_a_schema_the_engine_refuses_is_a_400_not_a_500(live_url, vllm_pool, api_key):
    client = v1_client(live_url, api_key, timeout=180)
    # Python's re reads {,3} (admission takes it); xgrammar and guidance both refuse it (issue 44 item 9).
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^a{,3}$"}}}
    with pytest.raises(openai.BadRequestError) as info:
        _ask(client, schema)
    assert info.value.body["param"] == "response_format" and info.value.body["code"] == "structured_output_refused"
    assert "the engine refuses it" in info.value.body["message"]
