"""Fuzz /v1's constrained-output and stored-JSON fields against the live stack (fake
engine): JSON Schemas (nested, with patterns, enums, references, NULs and lone
surrogates), tool definitions, an assistant's tool calls and Responses metadata.
Whatever is sent, the answer is a 2xx or a 4xx naming a parameter: never a 5xx.

Bounded and repeatable (derandomized, EXAMPLES per field); to hunt further, run it
with CHATSITE_FUZZ_EXAMPLES set (e.g. 500)."""
import json
import os

import httpx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from chatsite.pools.models import ModelPool
from inference.chat_templates import SMOLLM2_TOOLS

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]  # Hypothesis' examples through the live stack

EXAMPLES = int(os.environ.get("CHATSITE_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

REGEX_PIECES = ["a", "\\w", "\\d", "\\s", ".", "[a-z]", "[^\"]", "(", ")", "(?:", "|", "*", "+", "?", "{2}", "{1,9}",
                "{1,99}", "{,3}", "{999}", "\\1", "\\b", "^", "$", "(?=a)", "\\p{L}", "\x00", "\\"]
patterns = st.lists(st.sampled_from(REGEX_PIECES), max_size=12).map("".join)
texts = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12) | st.sampled_from(
    ["\x00", "\ud800", "a\udfffb", "#/$defs/A", "#", "http://x/y.json", "#/properties/a"])


def _schemas(children):
    keyword = st.sampled_from(["type", "properties", "items", "enum", "pattern", "$ref", "$defs", "anyOf",
                               "required", "minLength", "maxLength", "description", "const", "additionalProperties"])
    value = st.one_of(texts, patterns, st.integers(-5, 10**6), st.booleans(), st.none(),
                      st.sampled_from(["object", "string", "array", "integer"]), children,
                      st.lists(children | texts, max_size=4), st.dictionaries(texts, children, max_size=3))
    return st.dictionaries(keyword | texts, value, max_size=5)


schemas = st.recursive(st.just({"type": "string"}) | st.just({}), _schemas, max_leaves=30)
deep = st.integers(1, 400).map(lambda n: json.loads("[" * n + "]" * n))
values = schemas | deep | texts | st.lists(schemas, max_size=3)

ASK = {"model": "flagship", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}


def _tool(parameters, description="d") -> list:
    return [{"type": "function", "function": {"name": "f", "description": description, "parameters": parameters}}]


@pytest.fixture
def post(live_url, fake_workers, pool, auth):
    ModelPool.objects.filter(pk=pool.pk).update(chat_template=SMOLLM2_TOOLS)

    def send(path: str, body: dict) -> httpx.Response:
        # json.dumps escapes lone surrogates as \\ud800, as a client's JSON encoder does
        resp = httpx.post(f"{live_url}/v1/{path}", content=json.dumps(body), timeout=60,
                          headers={**auth, "Content-Type": "application/json"})
        assert resp.status_code < 500, (body, resp.text[:500])
        if resp.status_code == 400:
            assert resp.json()["error"]["param"], resp.text
        return resp

    return send


@FUZZ
@given(schema=values)
def test_response_format_schemas(post, schema):
    post("chat/completions", {**ASK, "response_format": {"type": "json_schema",
                                                          "json_schema": {"name": "x", "schema": schema}}})


@FUZZ
@given(parameters=values, description=texts, choice=st.sampled_from(["auto", "required", "named"]))
def test_tool_definitions(post, parameters, description, choice):
    tool_choice = {"type": "function", "function": {"name": "f"}} if choice == "named" else choice
    post("chat/completions", {**ASK, "tools": _tool(parameters, description), "tool_choice": tool_choice})


@FUZZ
@given(name=texts, arguments=texts | values.map(json.dumps), call_id=texts)
def test_an_assistants_tool_calls(post, name, arguments, call_id):
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    messages = [*ASK["messages"], {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call_id, "content": "ok"}]
    post("chat/completions", {**ASK, "messages": messages, "tools": _tool({"type": "object"})})


@FUZZ
@given(metadata=st.dictionaries(texts, texts | values, max_size=4) | values)
def test_responses_metadata(post, metadata):
    post("responses", {"model": "flagship", "input": "Hi", "max_output_tokens": 16, "metadata": metadata})
