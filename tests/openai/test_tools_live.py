"""Tool calling through the official `openai` package against the live stack (daphne,
Celery workers with the deterministic fake engine, Redis). The fake engine answers a
schema-constrained reply with a value of that schema and, offered tools with `auto`,
calls the one the user names (inference/fake_backend.py)."""
import json
from typing import Literal

import httpx
import jsonschema
import openai
import pydantic
import pytest

from chatsite.chats.models import Message
from chatsite.pools.models import ModelPool
from inference.chat_templates import SMOLLM2_TOOLS
from tests.factories import PoolFactory
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER = {"type": "object", "properties": {"city": {"type": "string"},
                                            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
           "required": ["city", "unit"], "additionalProperties": False}
CLOCK = {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time in a zone",
                                           "parameters": CLOCK}}]
SCHEMAS = {"get_weather": WEATHER, "get_time": CLOCK}
ASK = [{"role": "user", "content": "What is get_weather saying for Paris?"}]


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    ModelPool.objects.filter(pk=pool.pk).update(chat_template=SMOLLM2_TOOLS)
    PoolFactory(name="small")  # no chat template of its own: the fake model's has no tools
    return v1_client(live_url, api_key)


def _run(completion_id: str):
    return wait_terminal(int(completion_id.removeprefix("chatcmpl-")))


def _valid_calls(calls) -> list[tuple[str, dict]]:
    out = []
    for call in calls:
        assert call.type == "function" and call.id.startswith("call_")
        arguments = json.loads(call.function.arguments)
        jsonschema.validate(arguments, SCHEMAS[call.function.name])
        out.append((call.function.name, arguments))
    return out


def test_required_makes_a_schema_valid_call_with_no_content(client):
    out = client.chat.completions.create(model="flagship", messages=ASK, tools=TOOLS, tool_choice="required",
                                         max_tokens=300, seed=3)
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = _valid_calls(choice.message.tool_calls)
    assert len(calls) == 2 and calls[0][0] in SCHEMAS  # parallel calls are allowed by default
    run = _run(out.id)
    assert run.sampling["response_format"]["name"] == "tool_calls"  # constrained by the tools' schemas


def test_a_named_function_is_the_one_called(client):
    out = client.chat.completions.create(model="flagship", messages=ASK, tools=TOOLS, max_tokens=300,
                                         tool_choice={"type": "function", "function": {"name": "get_time"}})
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert [name for name, _ in _valid_calls(choice.message.tool_calls)] == ["get_time"]
    run = _run(out.id)
    assert choice.message.tool_calls[0].id == f"call_{run.pk}_0"
    assert json.loads(run.assistant_message.content) == json.loads(choice.message.tool_calls[0].function.arguments)


def test_auto_parses_the_models_tool_call_block_and_keeps_its_words_as_content(client):
    out = client.chat.completions.create(model="flagship", messages=ASK, tools=TOOLS, max_tokens=300)
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Calling get_weather."  # the markup is not content
    assert [name for name, _ in _valid_calls(choice.message.tool_calls)] == ["get_weather"]
    run = _run(out.id)
    assert "<tool_call>" in run.assistant_message.content  # saved as the model wrote it
    assert "response_format" not in run.sampling or run.sampling["response_format"] is None


def test_none_offers_no_tools_and_answers_in_words(client):
    out = client.chat.completions.create(model="flagship", messages=ASK, tools=TOOLS, tool_choice="none",
                                         max_tokens=30)
    choice = out.choices[0]
    assert choice.message.tool_calls is None and choice.finish_reason in ("stop", "length")
    run = _run(out.id)
    assert choice.message.content == run.assistant_message.content != "" and "tools" not in run.sampling


def test_a_round_trip_sends_the_call_and_its_result_back_and_gets_an_answer(client):
    first = client.chat.completions.create(model="flagship", messages=ASK, tools=TOOLS, max_tokens=300)
    call = first.choices[0].message.tool_calls[0]
    messages = [*ASK, first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"sky": "clear", "celsius": 21})}]
    final = client.chat.completions.create(model="flagship", messages=messages, tools=TOOLS, max_tokens=30)
    choice = final.choices[0]
    assert choice.message.tool_calls is None and choice.finish_reason in ("stop", "length")
    run = _run(final.id)
    assert choice.message.content == run.assistant_message.content != ""
    # The call and its result are the chat's messages and reached the prompt.
    rows = list(Message.objects.filter(chat=run.chat).order_by("id"))
    assert [m.role for m in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[1].tool_calls == [{"id": call.id, "type": "function", "function": {
        "name": call.function.name, "arguments": call.function.arguments}}]
    assert rows[2].tool_call_id == call.id and run.user_message_id == rows[2].pk
    assert run.prompt_snapshot[1]["tool_calls"] == rows[1].tool_calls
    assert run.prompt_snapshot[2] == {"role": "tool", "content": rows[2].content, "tool_call_id": call.id}


@pytest.mark.parametrize("tool_choice", ["auto", "required", {"type": "function", "function": {"name": "get_weather"}}],
                         ids=["auto", "required", "named"])
def test_a_stream_reassembles_to_the_same_calls_as_a_whole_reply(client, tool_choice):
    asked = dict(model="flagship", messages=ASK, tools=TOOLS, tool_choice=tool_choice, max_tokens=300, seed=11)
    whole = client.chat.completions.create(**asked).choices[0]
    chunks = list(client.chat.completions.create(**asked, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert all("<tool" not in (d.content or "") and "</tool" not in (d.content or "") for d in deltas)
    starts = [call.index for d in deltas for call in d.tool_calls or () if call.id]  # a call's first chunk
    assert starts == list(range(len(whole.message.tool_calls)))
    with client.chat.completions.stream(**asked) as stream:  # the SDK's own reassembly
        streamed = stream.get_final_completion().choices[0]
    assert streamed.finish_reason == whole.finish_reason == "tool_calls"
    assert (streamed.message.content or None) == whole.message.content
    assert _valid_calls(streamed.message.tool_calls) == _valid_calls(whole.message.tool_calls)


def test_without_parallel_calls_a_required_reply_holds_one_call(client):
    out = client.chat.completions.create(model="flagship", messages=ASK, tools=TOOLS, tool_choice="required",
                                         parallel_tool_calls=False, max_tokens=300, seed=3)
    assert len(_valid_calls(out.choices[0].message.tool_calls)) == 1
    assert _run(out.id).sampling["response_format"]["schema"]["maxItems"] == 1


def test_a_streamed_tool_call_replayed_by_its_idempotency_key_is_the_same_bytes(client, live_url, api_key):
    body = {"model": "flagship", "messages": ASK, "tools": TOOLS, "max_tokens": 300, "stream": True}
    headers = {"Authorization": f"Bearer {api_key}", "Idempotency-Key": "tool-replay-1"}
    first = httpx.post(f"{live_url}/v1/chat/completions", json=body, headers=headers, timeout=60)
    again = httpx.post(f"{live_url}/v1/chat/completions", json=body, headers=headers, timeout=60)
    assert first.status_code == again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.content == first.content and b'"tool_calls": [{"index": 0, "id": "call_' in first.content
    # Another request with the key (tools differ) is refused, as for any body.
    other = httpx.post(f"{live_url}/v1/chat/completions", json={**body, "tool_choice": "required"},
                       headers=headers, timeout=60)
    assert other.status_code == 409


def test_bad_tools_are_a_400_naming_the_part(client):
    bad = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
                                                                         "properties": {"x": {"type": 7}}}}}]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="flagship", messages=ASK, tools=bad)
    assert info.value.body["param"] == "tools[0].function.parameters"
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="flagship", messages=ASK, tools=TOOLS,
                                       tool_choice={"type": "function", "function": {"name": "nope"}})
    assert info.value.body["param"] == "tool_choice.function.name"


def test_a_pool_whose_template_has_no_tools_refuses_them_by_name(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="small", messages=ASK, tools=TOOLS)
    assert info.value.body["param"] == "tools"
    assert "chat template of model 'small' has no tools" in info.value.body["message"]


def test_logprobs_with_tools_are_in_the_whole_answer_and_a_stream_still_reads_its_calls(client):
    ask = dict(model="flagship", messages=ASK, tools=TOOLS, max_tokens=300, seed=5, logprobs=True, top_logprobs=2)
    whole = client.chat.completions.create(**ask)
    content = whole.choices[0].logprobs.content
    run = _run(whole.id)
    assert len(content) == run.completion_tokens and all(t.logprob <= 0 and len(t.top_logprobs) == 2 for t in content)
    assert "".join(t.token for t in content) == run.assistant_message.content  # the raw reply, markup and all
    chunks = list(client.chat.completions.create(**ask, stream=True))
    calls = [c for ch in chunks if ch.choices for c in ch.choices[0].delta.tool_calls or ()]
    assert [c.function.name for c in calls if c.function.name] == [t.function.name for t in whole.choices[0].message.tool_calls]
    assert all(ch.choices[0].logprobs is None for ch in chunks if ch.choices)  # documented: a tool stream has none
    _run(chunks[0].id)  # saved before the test's rows are flushed


class WeatherOptions(pydantic.BaseModel):
    unit: Literal["celsius", "fahrenheit"]
    days: int


class GetWeather(pydantic.BaseModel):
    """The weather in a city."""
    city: str
    options: WeatherOptions


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "GetWeather"}}],
                         ids=["required", "named"])
def test_a_pydantic_tool_with_definitions_is_called_validly(client, tool_choice):
    tool = openai.pydantic_function_tool(GetWeather)  # parameters with $defs and a $ref to them
    assert "$defs" in tool["function"]["parameters"]
    out = client.chat.completions.create(model="flagship", messages=ASK, tools=[tool, *TOOLS], max_tokens=300,
                                         tool_choice=tool_choice, parallel_tool_calls=False, seed=3)
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    schemas = {**SCHEMAS, "GetWeather": tool["function"]["parameters"]}
    jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])


def _cut(client, tool_choice, max_tokens: int, **extra):
    return client.chat.completions.create(model="flagship", messages=ASK, tools=TOOLS, tool_choice=tool_choice,
                                          max_tokens=max_tokens, seed=3, parallel_tool_calls=False, **extra)


@pytest.mark.parametrize("tool_choice,max_tokens", [
    ("required", 16), ({"type": "function", "function": {"name": "get_weather"}}, 10)], ids=["required", "named"])
def test_a_call_cut_off_by_max_tokens_is_length_with_the_arguments_written_so_far(client, tool_choice, max_tokens):
    [whole] = _cut(client, tool_choice, 300).choices[0].message.tool_calls
    cut = _cut(client, tool_choice, max_tokens).choices[0]  # the fake engine writes 3 characters a token
    assert cut.finish_reason == "length" and cut.message.content is None
    [call] = cut.message.tool_calls
    assert call.function.name == whole.function.name and call.id.startswith("call_")
    assert whole.function.arguments.startswith(call.function.arguments) != (call.function.arguments == "")
    assert call.function.arguments != whole.function.arguments  # not JSON: cut off
    chunks = list(_cut(client, tool_choice, max_tokens, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert all(not d.content for d in deltas)  # the call's JSON is never content
    streamed = [p for d in deltas for p in d.tool_calls or ()]
    assert [p.function.name for p in streamed if p.function.name] == [call.function.name]
    assert "".join(p.function.arguments or "" for p in streamed) == call.function.arguments
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"


def test_a_required_reply_cut_off_before_a_name_has_no_call_and_no_content(client):
    choice = _cut(client, "required", 2).choices[0]  # '[{"name' at most
    assert choice.finish_reason == "length" and choice.message.content is None and not choice.message.tool_calls
