"""Structured outputs on the real engine: a json_schema reply from /v1/chat/completions
parses and validates against its schema (vLLM structured outputs on the CPU build)."""
import json

import jsonschema
import openai
import pytest

from tests.conftest import VLLM_POOL
from tests.runs.helpers import wait_terminal

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.vllm]

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["capital", "in_europe"],
          "properties": {"capital": {"type": "string", "enum": ["Paris", "Rome", "Madrid", "Berlin"]},
                         "in_europe": {"type": "boolean"}}}


def test_a_json_schema_reply_parses_and_validates(live_url, vllm_pool, api_key):
    client = openai.OpenAI(base_url=f"{live_url}/v1", api_key=api_key, max_retries=0, timeout=180)
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
