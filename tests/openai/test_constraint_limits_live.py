"""What a constrained reply may ask of the engine, through the official `openai`
package against the live stack (issue 44 items 1, 3, 9): a pattern that would stall
the pool, a schema nested too deep, a NUL in a stored JSON field, what the engine
itself would refuse: each a 400 naming the field, nothing written, never a 500."""
import httpx
import openai
import pytest

from chatsite.pools.models import ModelPool
from inference.chat_templates import SMOLLM2_TOOLS
from inference.fake_backend import REFUSE_MARKER
from tests.api.helpers import row_counts
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

ASK = [{"role": "user", "content": "What is get_weather saying for Paris?"}]
STALLING = r"^(\w{1,99}\s?){1,999}$"  # 10-20 s a token on the CPU engine, every other run waiting


def _nested(levels: int) -> dict:
    schema = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def _format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


def _tool(parameters: dict, description: str = "The weather") -> list[dict]:
    return [{"type": "function", "function": {"name": "get_weather", "description": description,
                                              "parameters": parameters}}]


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    ModelPool.objects.filter(pk=pool.pk).update(chat_template=SMOLLM2_TOOLS)
    return v1_client(live_url, api_key, timeout=30)


STRING = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
REFUSED = [
    ({"response_format": _format({"type": "object", "properties": {"a": {"type": "string", "pattern": STALLING}}})},
     "response_format.json_schema.schema.properties.a.pattern"),
    ({"response_format": _format({"type": "string", "pattern": r"^(\w{1,9}\s?){1,9}$"})},
     "response_format.json_schema.schema.pattern"),
    ({"response_format": _format({"type": "string", "pattern": r"^(a)\1$"})}, "response_format.json_schema.schema.pattern"),
    ({"response_format": _format({"type": "string", "pattern": r"\bword\b"})}, "response_format.json_schema.schema.pattern"),
    ({"response_format": _format(_nested(150))}, "response_format.json_schema.schema"),
    ({"response_format": _format(_nested(40))}, "response_format.json_schema.schema"),  # 80 levels: over vLLM's 64
    ({"response_format": _format({"type": "object", "properties": {"a\x00": {"type": "string"}}})},
     "response_format.json_schema.schema.properties"),
    ({"response_format": _format({"type": "string", "description": "x\x00y"})},
     "response_format.json_schema.schema.description"),
    ({"response_format": _format({"enum": list(range(1001))})}, "response_format.json_schema.schema.enum"),
    ({"response_format": _format({"$ref": "#/$defs/Missing"})}, "response_format.json_schema.schema.$ref"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "a\x00", "schema": STRING}}},
     "response_format.json_schema.name"),
    ({"tools": _tool(STRING, description="x\x00")}, "tools[0].function.description"),
    ({"tools": _tool({"type": "object", "properties": {"a": {"type": "string", "enum": ["\x00"]}}})},
     "tools[0].function.parameters.properties.a.enum[0]"),
    ({"tools": _tool({"type": "object", "properties": {"a": {"type": "string", "pattern": STALLING}}})},
     "tools[0].function.parameters.properties.a.pattern"),
    ({"tools": _tool({"type": "object", "properties": {"o": {"$ref": "#/$defs/Options"}}}), "tool_choice": "required"},
     "tools[0].function.parameters.properties.o.$ref"),
    ({"tools": _tool(_nested(150))}, "tools"),
]


@pytest.mark.parametrize("extra,param", REFUSED, ids=[p for _, p in REFUSED])
def test_a_costly_or_unstorable_constraint_is_a_400_naming_it_and_writes_nothing(client, extra, param):
    before = row_counts()
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="flagship", messages=ASK, max_tokens=24, **extra)
    assert info.value.status_code == 400 and info.value.body["param"] == param, info.value.body
    assert info.value.body["type"] == "invalid_request_error"
    assert row_counts() == before


def test_a_nul_in_an_assistant_messages_tool_call_is_a_400(client):
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather\x00", "arguments": "{}"}}
    messages = [*ASK, {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="flagship", messages=messages, tools=_tool(STRING), max_tokens=8)
    assert info.value.body["param"] == "messages[1].tool_calls[0].function.name"


@pytest.mark.parametrize("metadata", ['{"k": "v\\u0000"}', '{"k\\u0000": "v"}', '{"k": "\\ud800"}'],
                         ids=["value", "key", "surrogate"])
def test_a_nul_in_a_responses_metadata_is_a_400(live_url, fake_workers, pool, auth, metadata):
    body = '{"model": "flagship", "input": "Hi", "metadata": %s}' % metadata  # escapes as a client sends them
    resp = httpx.post(f"{live_url}/v1/responses", content=body, timeout=10,
                      headers={**auth, "Content-Type": "application/json"})
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["param"] in ("metadata", "metadata.k")


def test_a_body_nested_near_the_parsers_limit_is_a_400_not_a_500(live_url, fake_workers, pool, auth):
    deep = "[" * 900 + "]" * 900
    asks = {"chat/completions": '"messages": [{"role": "user", "content": "Hi"}]', "responses": '"input": "Hi"'}
    for path, field in (("chat/completions", "response_format"), ("chat/completions", "tools"),
                        ("responses", "metadata")):
        body = '{"model": "flagship", %s, "%s": %s}' % (asks[path], field, deep)
        resp = httpx.post(f"{live_url}/v1/{path}", content=body, timeout=10,
                          headers={**auth, "Content-Type": "application/json"})
        assert resp.status_code == 400, (field, resp.text[:300])


def test_the_limits_leave_ordinary_constraints_alone(client):
    schema = {"type": "object", "required": ["ip", "slug", "email"], "properties": {
        "ip": {"type": "string", "pattern": r"^(\d{1,3}\.){3}\d{1,3}$"},
        "slug": {"type": "string", "pattern": r"^([a-z0-9]+-)*[a-z0-9]+$"},
        "email": {"type": "string", "pattern": r"^[\w.+-]+@([\w-]+\.)+\w+$"},
        "tags": {"type": "array", "items": {"type": "string", "enum": [f"t{i}" for i in range(1000)]}}}}
    out = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=200,
                                         response_format=_format({**schema, "properties": {
                                             **schema["properties"], "deep": _nested(20)}}))
    assert out.choices[0].finish_reason in ("stop", "length") and out.choices[0].message.content


@pytest.mark.parametrize("extra,param", [
    ({"response_format": _format({**STRING, "description": REFUSE_MARKER})}, "response_format"),
    ({"tools": _tool({**STRING, "description": REFUSE_MARKER}), "tool_choice": "required"}, "tools"),
], ids=["response_format", "tools"])
def test_a_schema_the_engine_cannot_compile_is_a_400_naming_it(client, extra, param):
    with pytest.raises(openai.BadRequestError) as info:  # the worker asks the engine before submitting
        client.chat.completions.create(model="flagship", messages=ASK, max_tokens=24, **extra)
    body = info.value.body
    assert body["param"] == param and body["code"] == "structured_output_refused" and REFUSE_MARKER in body["message"]
    run = wait_terminal(int(info.value.response.headers["X-Run-Id"]))
    assert run.status == "failed" and run.completion_tokens == 0
    with pytest.raises(openai.APIError) as info:  # streamed: the error chunk, as for any failed run
        list(client.chat.completions.create(model="flagship", messages=ASK, max_tokens=24, stream=True, **extra))
    assert info.value.body["code"] == "structured_output_refused" and info.value.body["param"] == param
