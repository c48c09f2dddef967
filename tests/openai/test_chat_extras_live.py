"""Chat completions beyond the plain reply, through the official `openai` package against
the live stack (fake-engine workers): a conversation ending in the assistant's message
(a prefill), a system message alone, usage details, vLLM's own fields honoured or refused
by name, response_format with tools. What depends on the model (that logit_bias steers
it, what a prefill makes it say) is tested on the real engine (tests/e2e/test_vllm_v1_extras.py)."""
import json

import jsonschema
import openai
import pytest

from chatsite.chats.models import Message
from chatsite.pools.models import ModelPool
from inference.chat_templates import SMOLLM2_TOOLS
from tests.factories import PoolFactory
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

ASK = [{"role": "user", "content": "Name a colour."}]
PREFILL = [*ASK, {"role": "assistant", "content": "My favourite colour is"}]
PLACE = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
         "additionalProperties": False}


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    PoolFactory(name="small")
    return v1_client(live_url, api_key)


def _run(completion_id: str):
    return wait_terminal(int(completion_id.removeprefix("chatcmpl-")))


def _streamed(client, **kw) -> tuple[str, list]:
    chunks = list(client.chat.completions.create(stream=True, **kw))
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), chunks


def test_a_conversation_ending_in_the_assistants_message_is_carried_on(client):
    out = client.chat.completions.create(model="flagship", messages=PREFILL, max_tokens=20, seed=4)
    run = _run(out.id)
    reply = out.choices[0].message.content
    assert reply == run.assistant_message.content != "" and not reply.startswith("My favourite")  # the new text only
    prefill = Message.objects.get(pk=run.user_message_id)
    assert (prefill.role, prefill.content) == ("assistant", "My favourite colour is")  # it answers the prefill
    assert run.prompt_snapshot[-1] == {"role": "assistant", "content": "My favourite colour is"}
    text, _ = _streamed(client, model="flagship", messages=PREFILL, max_tokens=20, seed=4)
    assert text == reply
    echoed = client.chat.completions.create(model="flagship", messages=PREFILL, max_tokens=20, seed=4,
                                            extra_body={"echo": True})
    assert echoed.choices[0].message.content == "My favourite colour is" + reply
    text, _ = _streamed(client, model="flagship", messages=PREFILL, max_tokens=20, seed=4, extra_body={"echo": True})
    assert text == "My favourite colour is" + reply
    # vLLM's switches: a new reply after it (OpenAI's reading), or carried on, said explicitly
    new_turn = client.chat.completions.create(model="flagship", messages=PREFILL, max_tokens=20, seed=4,
                                              extra_body={"add_generation_prompt": True})
    assert new_turn.choices[0].message.content != reply  # another prompt: the template opened a new reply
    same = client.chat.completions.create(model="flagship", messages=PREFILL, max_tokens=20, seed=4, extra_body={
        "continue_final_message": True, "add_generation_prompt": False})
    assert same.choices[0].message.content == reply


@pytest.mark.parametrize("fields, param", [
    ({"continue_final_message": True, "add_generation_prompt": True}, "continue_final_message"),
    ({"add_generation_prompt": "yes"}, "add_generation_prompt"), ({"echo": 1}, "echo"),
])
def test_the_chat_templates_switches_are_checked(client, fields, param):
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="flagship", messages=PREFILL, max_tokens=5, extra_body=fields)
    assert refused.value.body["param"] == param
    with pytest.raises(openai.BadRequestError) as refused:  # nothing to carry on after the user's message
        client.chat.completions.create(model="flagship", messages=ASK, max_tokens=5,
                                       extra_body={"continue_final_message": True})
    assert refused.value.body["param"] == "continue_final_message"


def test_a_system_message_alone_is_answered(client):
    system = [{"role": "system", "content": "Say hello to the user."}]
    out = client.chat.completions.create(model="flagship", messages=system, max_tokens=15, seed=2)
    run = _run(out.id)
    assert out.choices[0].message.content == run.assistant_message.content != "" and run.status == "completed"
    assert run.prompt_snapshot == system and out.usage.prompt_tokens > 0
    text, _ = _streamed(client, model="flagship", messages=system, max_tokens=15, seed=2)
    assert text == out.choices[0].message.content


def test_usage_details_count_the_prompt_tokens_the_prefix_cache_served(client):
    long = [{"role": "user", "content": "Summarise this: " + "the loop reads each item in order. " * 12}]
    first = client.chat.completions.create(model="flagship", messages=long, max_tokens=5)
    second = client.chat.completions.create(model="flagship", messages=long, max_tokens=5)
    assert first.usage.prompt_tokens_details.cached_tokens == 0  # the worker's engine had not seen it
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert 0 < cached < second.usage.prompt_tokens and cached % 16 == 0  # whole blocks, never the last token
    assert second.usage.completion_tokens_details.reasoning_tokens == 0
    assert _run(second.id).details["cached_tokens"] == cached  # kept with the run: a replay reads it
    chunks = list(client.chat.completions.create(model="flagship", messages=long, max_tokens=5, stream=True,
                                                 stream_options={"include_usage": True}))
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == cached
    response = client.responses.create(model="flagship", input=long[0]["content"], max_output_tokens=5)
    assert response.usage.input_tokens_details.cached_tokens == cached  # the same chat prompt, cached too


def test_token_ids_of_the_reply_and_the_prompt_when_asked(client):
    out = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=12, seed=3,
                                         extra_body={"return_token_ids": True})
    body = out.model_dump()
    assert len(body["choices"][0]["token_ids"]) == out.usage.completion_tokens
    assert len(body["prompt_token_ids"]) == out.usage.prompt_tokens
    _, chunks = _streamed(client, model="flagship", messages=ASK, max_tokens=12, seed=3,
                          extra_body={"return_token_ids": True})
    dumped = [c.model_dump() for c in chunks]
    assert [i for c in dumped for choice in c["choices"] for i in choice.get("token_ids") or []] == \
        body["choices"][0]["token_ids"]
    assert [c["prompt_token_ids"] for c in dumped if c.get("prompt_token_ids")] == [body["prompt_token_ids"]]
    plain = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=12, seed=3).model_dump()
    assert "token_ids" not in plain["choices"][0] and "prompt_token_ids" not in plain


def test_tokens_named_by_id_and_the_prompts_logprobs_when_asked(client):
    out = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=8, logprobs=True, top_logprobs=2,
                                         extra_body={"return_tokens_as_token_ids": True, "prompt_logprobs": 1})
    tokens = out.choices[0].logprobs.content
    assert tokens and all(t.token.startswith("token_id:") for t in tokens)
    prompt = out.model_dump()["prompt_logprobs"]
    assert prompt[0] is None and len(prompt) == out.usage.prompt_tokens
    assert all(1 <= len(position) <= 2 and all(set(v) == {"logprob", "rank", "decoded_token"}
                                                for v in position.values()) for position in prompt[1:])


def test_usage_on_every_chunk_with_continuous_usage_stats(client):
    _, chunks = _streamed(client, model="flagship", messages=ASK, max_tokens=30, seed=1,
                          stream_options={"include_usage": True, "continuous_usage_stats": True})
    counted = [c.usage for c in chunks[1:]]  # the opening chunk goes out before the prompt is read
    assert all(u is not None for u in counted) and counted[-1].completion_tokens == chunks[-1].usage.completion_tokens
    so_far = [u.completion_tokens for u in counted]
    assert so_far == sorted(so_far) and so_far[0] >= 1
    assert {u.prompt_tokens for u in counted} == {chunks[-1].usage.prompt_tokens}


def test_structured_outputs_min_tokens_and_allowed_token_ids_reach_the_run(client):
    out = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=10, extra_body={
        "structured_outputs": {"choice": ["red", "green", "blue"]}})
    assert out.choices[0].message.content in ("red", "green", "blue")
    long = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=80, extra_body={
        "min_tokens": 70, "allowed_token_ids": [1, 2, 3]})
    run = _run(long.id)
    assert long.usage.completion_tokens >= 70 and run.sampling["allowed_token_ids"] == [1, 2, 3]
    shaped = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=60, extra_body={
        "structured_outputs": {"json": json.dumps(PLACE)}})
    jsonschema.validate(json.loads(shaped.choices[0].message.content), PLACE)


@pytest.mark.parametrize("fields, param", [
    ({"use_beam_search": True}, "use_beam_search"), ({"stop_token_ids": [2]}, "stop_token_ids"),
    ({"guided_json": PLACE}, "guided_json"), ({"chat_template": "{{ messages }}"}, "chat_template"),
    ({"bad_words": ["x"]}, "bad_words"), ({"cache_salt": "abc"}, "cache_salt"),
    ({"structured_outputs": {"regex": "a+", "choice": ["a"]}}, "structured_outputs"),
    ({"structured_outputs": {"regex": "("}}, "structured_outputs.regex"),
    ({"structured_outputs": {"choice": []}}, "structured_outputs.choice"),
    ({"structured_outputs": {"json": {"type": 7}}}, "structured_outputs.json"),
    ({"structured_outputs": {"regex": "a", "whitespace_pattern": " "}}, "structured_outputs.whitespace_pattern"),
    ({"min_tokens": 99}, "min_tokens"), ({"allowed_token_ids": []}, "allowed_token_ids"),
    ({"prompt_logprobs": 21}, "prompt_logprobs"), ({"return_token_ids": "yes"}, "return_token_ids"),
    ({"logit_bias": {"abc": 1}}, "logit_bias"), ({"logit_bias": {"5": 100.5}}, "logit_bias"),
    ({"logit_bias": {"5": "1"}}, "logit_bias"),
])
def test_vllms_fields_not_served_or_out_of_range_are_refused_by_name(client, fields, param):
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="flagship", messages=ASK, max_tokens=20, extra_body=fields)
    assert refused.value.body["param"] == param
    # their defaults, as vLLM clients send them, are taken
    client.chat.completions.create(model="flagship", messages=ASK, max_tokens=5, extra_body={
        "use_beam_search": False, "stop_token_ids": [], "skip_special_tokens": True, "include_stop_str_in_output": False,
        "priority": 0, "request_id": "mine", "logit_bias": {}})


def test_logit_bias_is_kept_with_the_run(client):
    out = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=5, logit_bias={"17": -100, "3": 5})
    assert _run(out.id).sampling["logit_bias"] == {"17": -100.0, "3": 5.0}
    text = client.completions.create(model="flagship", prompt="Hi", max_tokens=5, logit_bias={"9": 1})
    assert wait_terminal(int(text.id.removeprefix("cmpl-"))).sampling["logit_bias"] == {"9": 1.0}


def test_a_response_format_with_tools_answers_in_that_format_or_calls(client, pool):
    ModelPool.objects.filter(pk=pool.pk).update(chat_template=SMOLLM2_TOOLS)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    fmt = {"type": "json_schema", "json_schema": {"name": "place", "schema": PLACE}}
    out = client.chat.completions.create(model="flagship", messages=ASK, tools=tools, response_format=fmt,
                                         max_tokens=80)
    jsonschema.validate(json.loads(out.choices[0].message.content), PLACE)  # the fake engine writes the content
    assert out.choices[0].finish_reason == "stop" and not out.choices[0].message.tool_calls
    called = client.chat.completions.create(model="flagship", messages=ASK, tools=tools, response_format=fmt,
                                            tool_choice="required", max_tokens=80)
    assert called.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert called.choices[0].finish_reason == "tool_calls"


def test_a_responses_input_ending_with_a_prefill_or_a_system_message_alone_is_answered(client):
    out = client.responses.create(model="flagship", input=PREFILL, max_output_tokens=20)
    run = wait_terminal(int(out.id.removeprefix("resp_")))
    assert out.output_text == run.assistant_message.content != ""
    assert run.prompt_snapshot[-1] == {"role": "assistant", "content": "My favourite colour is"}
    chat = client.chat.completions.create(model="flagship", messages=PREFILL, max_tokens=20, seed=run.seed)
    assert chat.choices[0].message.content == out.output_text  # the same prompt: the prefill carried on
    alone = client.responses.create(model="flagship", input=[{"role": "developer", "content": "Greet the user."}],
                                    max_output_tokens=10)
    assert alone.output_text != "" and alone.status in ("completed", "incomplete")
