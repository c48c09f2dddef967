"""POST /v1/responses refuses what it cannot honour with a 400 naming the parameter,
in OpenAI's error shape, and writes nothing."""
import httpx
import openai
import pytest

from chatsite.chats.models import Chat
from chatsite.runs.models import GenerationRun
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

OK = {"model": "flagship", "input": "Hello"}
REFUSED = [
    ({"tools": [{"type": "function", "name": "f", "parameters": {}}]}, "tools"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"reasoning": {"effort": "high"}}, "reasoning"),
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": 5}}}}, "text.format.schema"),
    ({"text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format.name"),
    ({"text": {"format": {"type": "grammar"}}}, "text.format"),
    ({"store": False, "background": True}, "background"),
    ({"store": "no"}, "store"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"tools": [{"type": "function", "name": "a b"}]}, "tools[0].name"),
    ({"tool_choice": {"type": "function", "name": "g"}}, "tool_choice.name"),
    ({"include": ["reasoning.encrypted_content"]}, "include"),
    ({"include": "message.output_text.logprobs"}, "include"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"include": ["message.output_text.logprobs"], "top_logprobs": 21}, "top_logprobs"),
    ({"truncation": "auto"}, "truncation"),
    ({"conversation": "conv_1"}, "conversation"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}]},
     "input[0].content[0].type"),
    ({"input": [{"type": "function_call_output", "call_id": "c", "output": "1"}]}, "input"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]}, "input[0]"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1]"}]}, "input[0].arguments"),
    ({"input": [{"type": "reasoning", "summary": []}]}, "input[0].type"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
    ({"input": [{"role": "tool", "content": "x"}, {"role": "user", "content": "Hi"}]}, "input[0].role"),
    ({"input": []}, "input"),
    ({"input": 5}, "input"),
    ({"model": ""}, "model"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"max_output_tokens": 100000}, "max_output_tokens"),
    ({"temperature": 3}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"instructions": 5}, "instructions"),
    ({"instructions": "x" * 9000}, "instructions"),
    ({"input": [{"role": "system", "content": "\x00"}, {"role": "user", "content": "Hi"}]}, "input[0].content"),
    ({"input": "\x00"}, "input[0].content"),
    ({"input": "word " * 1000}, "input[0].content"),  # longer than the model's context
    ({"metadata": {"k": 5}}, "metadata"),
    ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ({"background": "yes"}, "background"),
    ({"ignore_eos": "yes"}, "ignore_eos"),
    ({"stream": "yes"}, "stream"),
    ({"stream_options": {"include_obfuscation": False}}, "stream_options"),
    ({"previous_response_id": 5}, "previous_response_id"),
]


@pytest.mark.parametrize("extra,param", REFUSED, ids=[p for _, p in REFUSED])
def test_refused_by_name_and_nothing_written(live_url, fake_workers, pool, auth, extra, param):
    resp = httpx.post(f"{live_url}/v1/responses", json={**OK, **extra}, headers=auth, timeout=10)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error" and error["message"]
    if "word" in str(extra.get("input")):
        assert error["code"] == "context_length_exceeded"
    assert not GenerationRun.objects.exists() and not Chat.objects.exists()


def test_defaults_are_accepted(live_url, fake_workers, pool, api_key):
    client = v1_client(live_url, api_key, timeout=30)
    out = client.responses.create(model="flagship", input="Hi", tools=[], tool_choice="auto", store=True,
                                  text={"format": {"type": "text"}}, truncation="disabled", user="u-1",
                                  parallel_tool_calls=True)
    assert out.status in ("completed", "incomplete")


def test_unknown_model_missing_key_and_unknown_response(live_url, fake_workers, pool, api_key):
    client = v1_client(live_url, api_key, timeout=30)
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="nope", input="Hi")
    assert info.value.body["code"] == "model_not_found" and info.value.body["param"] == "model"
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="flagship", input="Hi", previous_response_id="resp_999999")
    assert info.value.body["param"] == "previous_response_id"
    for bad in ("resp_999999", "resp_x", "chatcmpl-1", "resp_" + "9" * 30):
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(bad)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=client.base_url, api_key="csk_nope", max_retries=0).responses.retrieve("resp_1")
    resp = httpx.put(f"{live_url}/v1/responses", headers={"Authorization": f"Bearer {api_key}"}, timeout=10)
    assert resp.status_code == 405 and resp.headers["allow"] == "POST"
    assert not GenerationRun.objects.exists()


def test_a_budget_refusal_is_a_429_that_writes_nothing_and_is_counted(live_url, fake_workers, pool, api_key, tenant):
    from chatsite.quotas.models import TenantQuota, TenantUsage

    TenantQuota.objects.create(tenant=tenant, token_budget=5)  # less than the prompt
    client = v1_client(live_url, api_key, timeout=30)
    with pytest.raises(openai.RateLimitError) as info:
        client.responses.create(**OK)
    assert info.value.body["code"] == "budget_exhausted"
    assert GenerationRun.objects.count() == 0 and Chat.objects.count() == 0
    assert TenantUsage.objects.get(tenant=tenant).refused_requests == 1
