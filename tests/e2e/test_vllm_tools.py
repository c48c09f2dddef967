"""Tool calling on the real engine: SmolLM2-135M-Instruct, through the shipped tool
template, asked for a named function, writes arguments that parse and match the
function's schema (vLLM structured outputs hold it to them, on the CPU build)."""
import json
from typing import Literal

import jsonschema
import openai
import pydantic
import pytest

from tests.conftest import VLLM_POOL
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.vllm]

WEATHER = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
           "properties": {"city": {"type": "string", "maxLength": 40},
                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The current weather in a city",
                                           "parameters": WEATHER}}]


def test_a_named_function_call_has_arguments_matching_its_schema(live_url, vllm_pool, api_key):
    client = v1_client(live_url, api_key, timeout=180)
    out = client.chat.completions.create(
        model=VLLM_POOL, max_tokens=80, temperature=0.0, tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather"
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, WEATHER)
    run = wait_terminal(int(out.id.removeprefix("chatcmpl-")), timeout=120)
    assert run.status == "completed" and json.loads(run.assistant_message.content) == arguments
    # The tools reached the prompt through the pool's template: far more prompt than the question alone.
    assert run.prompt_tokens > 100


class Options(pydantic.BaseModel):
    unit: Literal["celsius", "fahrenheit"]


class GetWeather(pydantic.BaseModel):
    """The current weather in a city."""
    city: str = pydantic.Field(max_length=40)
    options: Options


def _client(live_url, api_key):
    return v1_client(live_url, api_key, timeout=180)


def test_a_required_call_of_a_pydantic_tool_with_definitions_is_valid(live_url, vllm_pool, api_key):
    tool = openai.pydantic_function_tool(GetWeather)  # its parameters hold $defs and a $ref (issue 41 item 1)
    out = _client(live_url, api_key).chat.completions.create(
        model=VLLM_POOL, max_tokens=80, temperature=0.0, tools=[tool], tool_choice="required",
        messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls  # parallel calls allowed: on compact JSON the model wrote more than one
    for call in choice.message.tool_calls:
        assert call.function.name == "GetWeather"
        jsonschema.validate(json.loads(call.function.arguments), tool["function"]["parameters"])


def test_a_required_call_cut_off_by_max_tokens_is_length_and_never_content(live_url, vllm_pool, api_key):
    asked = dict(model=VLLM_POOL, max_tokens=12, temperature=0.0, tools=TOOLS, tool_choice="required",
                 messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    client = _client(live_url, api_key)
    choice = client.chat.completions.create(**asked).choices[0]
    assert choice.finish_reason == "length" and choice.message.content is None  # issue 41 item 2
    run_text = wait_terminal(int(client.chat.completions.create(**asked).id.removeprefix("chatcmpl-")),
                             timeout=120).assistant_message.content
    for call in choice.message.tool_calls or ():
        assert call.function.name == "get_weather" and call.function.arguments in run_text
    chunks = list(client.chat.completions.create(**asked, stream=True))
    assert all(not c.choices[0].delta.content for c in chunks if c.choices)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
