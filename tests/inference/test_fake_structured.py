"""The fake engine under a JSON Schema writes a value of that schema, the same for
the same request; offered tools with no constraint, it calls the one the user names
in the Hermes format; after a tool's result it answers in words."""
import json

import jsonschema
import pytest

from inference.fake_backend import FakeBackend
from inference.prompt import assemble
from inference.types import GenerationRequest

SCHEMAS = [
    {"type": "object", "properties": {"city": {"type": "string", "maxLength": 5}, "n": {"type": "integer",
                                                                                        "minimum": 3, "maximum": 4}},
     "required": ["city", "n"], "additionalProperties": False},
    {"type": "array", "minItems": 1, "maxItems": 1, "items": {"anyOf": [
        {"type": "object", "properties": {"name": {"const": "f"}, "arguments": {"type": "object"}},
         "required": ["name", "arguments"]}]}},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2},
                                      "ok": {"type": "boolean"}, "x": {"type": ["number", "null"]},
                                      "ref": {"$ref": "#/$defs/r"}}, "$defs": {"r": {"type": "string"}}},
]
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": SCHEMAS[0]}},
         {"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}}]


def _reply(backend, messages, **fields) -> str:
    plan = assemble(backend.tokenizer, messages, max_prompt_tokens=10_000, tools=fields.pop("tools", None))
    return "".join(backend.reply_words(GenerationRequest("r", plan.token_ids, 500, seed=5, **fields)))


@pytest.mark.parametrize("schema", SCHEMAS)
def test_a_schema_constrained_reply_is_a_value_of_the_schema_and_the_same_each_time(schema):
    backend = FakeBackend()
    asked = [{"role": "user", "content": "Hi"}]
    text = _reply(backend, asked, json_schema=json.dumps(schema))
    jsonschema.validate(json.loads(text), schema)
    assert _reply(backend, asked, json_schema=json.dumps(schema)) == text


def test_offered_tools_it_calls_the_one_named_then_answers_the_result_in_words():
    backend = FakeBackend()
    asked = [{"role": "user", "content": "What does clock say?"}]
    text = _reply(backend, asked, tools=TOOLS)
    assert text.startswith("Calling clock.\n<tool_call>\n") and text.endswith("\n</tool_call>")
    call = json.loads(text.removeprefix("Calling clock.\n<tool_call>\n").removesuffix("\n</tool_call>"))
    assert call["name"] == "clock"
    answered = asked + [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "noon"}]
    assert "<tool_call>" not in _reply(backend, answered, tools=TOOLS)
    assert "<tool_call>" not in _reply(backend, asked)  # no tools offered: words


@pytest.mark.parametrize("fields", [{}, {"tools": TOOLS}], ids=["words", "a tool call"])
def test_a_reply_carried_on_after_a_failover_is_the_rest_of_the_same_reply(fields):
    backend = FakeBackend()
    asked = [{"role": "user", "content": "What does weather say?"}]
    plan = assemble(backend.tokenizer, asked, max_prompt_tokens=10_000, tools=fields.get("tools"))
    whole = backend.reply_words(GenerationRequest("r", plan.token_ids, 500, seed=5))
    carried = "".join(whole[:7])  # what the worker that died had streamed
    again = assemble(backend.tokenizer, asked, max_prompt_tokens=10_000, tools=fields.get("tools"), carried=carried)
    rest = backend.reply_words(GenerationRequest("r", again.token_ids, 500 - 7, seed=5))
    assert carried + "".join(rest) == "".join(whole) and len(rest) == len(whole) - 7


@pytest.mark.parametrize("cut", [1, 4, 9])
def test_a_constrained_reply_carried_on_with_its_ids_ends_as_the_whole_value_and_without_them_breaks(cut):
    backend = FakeBackend()
    asked, schema = [{"role": "user", "content": "Hi"}], json.dumps(SCHEMAS[0])
    whole = _reply(backend, asked, json_schema=schema)
    so_far = "".join(backend.reply_words(GenerationRequest(
        "r", assemble(backend.tokenizer, asked, max_prompt_tokens=10_000).token_ids, 500, seed=5,
        json_schema=schema))[:cut])
    plan = assemble(backend.tokenizer, asked, max_prompt_tokens=10_000, carried=so_far)
    carried = tuple(plan.token_ids[len(plan.token_ids) - plan.num_carried_tokens:])

    def rest(ids):
        return "".join(backend.reply_words(GenerationRequest("r", plan.token_ids, 500, seed=5, json_schema=schema,
                                                             carried_ids=ids)))

    assert so_far + rest(carried) == whole  # the grammar carried on: the same value, whole
    with pytest.raises(ValueError):  # as vLLM's grammar started afresh: a second value after the first's start
        json.loads(so_far + rest(()))
