"""Function tools on the Responses API through the official `openai` package against the
live stack (fake-engine workers, whose model calls the tool the user names): the
function_call output item, streamed and not, the next turn's function_call_output with
previous_response_id or with the whole conversation as input, and the input items."""
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

WEATHER = {"type": "object", "properties": {"city": {"type": "string"},
                                            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"], "additionalProperties": False}
CLOCK = {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}
TOOLS = [{"type": "function", "name": "get_weather", "description": "The weather in a city", "parameters": WEATHER},
         {"type": "function", "name": "get_time", "description": "The time in a zone", "parameters": CLOCK}]
SCHEMAS = {"get_weather": WEATHER, "get_time": CLOCK}
ASK = "What is get_weather saying for Paris?"


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    ModelPool.objects.filter(pk=pool.pk).update(chat_template=SMOLLM2_TOOLS)
    PoolFactory(name="small")
    return v1_client(live_url, api_key)


def _run(response_id: str):
    return wait_terminal(int(response_id.removeprefix("resp_")))


def _unparsed(value):
    """An item the SDK's stream helper assembled, without the fields it adds (parsed)."""
    if isinstance(value, dict):
        return {k: _unparsed(v) for k, v in value.items() if k not in ("parsed", "parsed_arguments")}
    if isinstance(value, list):
        return [_unparsed(v) for v in value]
    return value


def _calls(response) -> list:
    calls = [item for item in response.output if item.type == "function_call"]
    for call in calls:
        jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])
    return calls


def test_a_call_is_a_function_call_item_and_its_output_gets_an_answer(client):
    first = client.responses.create(model="flagship", input=ASK, tools=TOOLS, max_output_tokens=300)
    run = _run(first.id)
    assert first.status == "completed" and [i.type for i in first.output] == ["message", "function_call"]
    assert first.output_text == "Calling get_weather."  # the call's markup is not text
    [call] = _calls(first)
    assert (call.name, call.call_id, call.id, call.status) == ("get_weather", f"call_{run.pk}_0", f"fc_{run.pk}_0",
                                                               "completed")
    assert [t.name for t in first.tools] == ["get_weather", "get_time"] and first.tool_choice == "auto"
    assert client.responses.retrieve(first.id).model_dump() == first.model_dump()
    second = client.responses.create(model="flagship", previous_response_id=first.id, tools=TOOLS,
                                     max_output_tokens=40, input=[{"type": "function_call_output",
                                                                   "call_id": call.call_id, "output": "sunny, 21C"}])
    answer = _run(second.id)
    assert second.output_text == answer.assistant_message.content != "" and not _calls(second)
    # the call reached the prompt as the model's call, and its output as the tool's message answering it
    assert answer.prompt_snapshot[-2:] == [
        {"role": "assistant", "content": "Calling get_weather.", "tool_calls": [
            {"id": call.call_id, "type": "function", "function": {"name": "get_weather",
                                                                   "arguments": call.arguments}}]},
        {"role": "tool", "content": "sunny, 21C", "tool_call_id": call.call_id}]
    assert Message.objects.get(pk=answer.user_message_id).role == "tool"


def test_the_whole_conversation_as_input_works_without_a_previous_response(client):
    first = client.responses.create(model="flagship", input=ASK, tools=TOOLS, max_output_tokens=300)
    [call] = _calls(first)
    items = [{"role": "user", "content": ASK}, *[item.model_dump(exclude_none=True) for item in first.output],
             {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
    second = client.responses.create(model="flagship", input=items, tools=TOOLS, max_output_tokens=40)
    snapshot = _run(second.id).prompt_snapshot
    assert [m["role"] for m in snapshot] == ["user", "assistant", "tool"]
    assert snapshot[1]["content"] == "Calling get_weather." and snapshot[1]["tool_calls"][0]["id"] == call.call_id
    with pytest.raises(openai.BadRequestError) as refused:  # an output answering a call no one made
        client.responses.create(model="flagship", previous_response_id=first.id, tools=TOOLS, input=[
            {"type": "function_call_output", "call_id": "call_nobody", "output": "x"}])
    assert refused.value.body["param"] == "input"


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "name": "get_time"}], ids=["required", "named"])
def test_a_reply_that_must_call_is_only_calls(client, tool_choice):
    out = client.responses.create(model="flagship", input=ASK, tools=TOOLS, tool_choice=tool_choice,
                                  parallel_tool_calls=False, max_output_tokens=300)
    calls = _calls(out)
    assert [i.type for i in out.output] == ["function_call"] and len(calls) == 1 and out.output_text == ""
    if isinstance(tool_choice, dict):
        assert calls[0].name == "get_time" and out.tool_choice.name == "get_time"
    assert out.parallel_tool_calls is False


@pytest.mark.parametrize("tool_choice", ["auto", "required", {"type": "function", "name": "get_weather"}],
                         ids=["auto", "required", "named"])
def test_a_stream_says_the_items_a_retrieve_has(client, tool_choice):
    asked = dict(model="flagship", input=ASK, tools=TOOLS, tool_choice=tool_choice, max_output_tokens=300)
    events = list(client.responses.create(**asked, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    assert events[-1].type == "response.completed" and final.model_dump() == client.responses.retrieve(
        final.id).model_dump()
    added = [e.item for e in events if e.type == "response.output_item.added"]
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [i.id for i in added] == [i.id for i in final.output] == sorted((i.id for i in done),
                                                                            key=[i.id for i in final.output].index)
    for item in final.output:
        if item.type == "function_call":
            deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta"
                             and e.item_id == item.id)
            [finished] = [e for e in events if e.type == "response.function_call_arguments.done"
                          and e.item_id == item.id]
            assert deltas == finished.arguments == item.arguments
        else:
            assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == final.output_text
    with client.responses.stream(**asked) as stream:  # the SDK's own assembly agrees
        assembled = stream.get_final_response()
    assert [_unparsed(i.model_dump()) for i in assembled.output] == [
        i.model_dump() for i in client.responses.retrieve(assembled.id).output]
    resumed = list(client.responses.retrieve(final.id, stream=True, starting_after=3))
    assert [e.model_dump() for e in resumed] == [e.model_dump() for e in events[4:]]


def test_the_input_items_of_a_response(client):
    first = client.responses.create(model="flagship", input=[{"role": "developer", "content": "Be brief."},
                                                             {"role": "user", "content": ASK}],
                                    tools=TOOLS, max_output_tokens=300)
    [call] = _calls(first)
    page = client.responses.input_items.list(first.id, order="asc")
    assert [(i.type, i.role) for i in page.data] == [("message", "system"), ("message", "user")]
    assert page.data[1].content[0].text == ASK and page.has_more is False
    second = client.responses.create(model="flagship", previous_response_id=first.id, tools=TOOLS, input=[
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}])
    [item] = client.responses.input_items.list(second.id).data  # this response's own input only
    assert (item.type, item.call_id, item.output) == ("function_call_output", call.call_id, "sunny")
    newest = client.responses.input_items.list(first.id, limit=1)
    assert newest.data[0].role == "user" and newest.has_more is True  # newest first by default
    older = client.responses.input_items.list(first.id, limit=1, after=newest.data[0].id)
    assert older.data[0].role == "system" and older.has_more is False
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list("resp_999999")
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.input_items.list(first.id, limit=101)
    assert refused.value.body["param"] == "limit"
