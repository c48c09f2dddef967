"""Bad input gets a clear 4xx naming the problem, and nothing is written.

The same cases go to the REST endpoint (POST /api/chats/{id}/messages/) and to
POST /v1/chat/completions, whose refusals must not leave a chat behind either."""
import pytest

from tests.api.helpers import assert_error, assert_openai_error, key_client, row_counts
from tests.factories import PoolFactory

pytestmark = pytest.mark.django_db

# (name, the message's content as raw JSON, more fields as raw JSON, the field at fault).
# Raw text, so that NaN, Infinity and escapes reach the server exactly as a client sends them.
CASES = [
    ("empty content", '""', "", "content"),
    ("blank content", '"  \\n "', "", "content"),
    ("oversized content", f'"{"x" * 32001}"', "", "content"),
    ("NUL in content", '"a\\u0000b"', "", "content"),
    ("lone surrogate", '"a\\ud800b"', "", "content"),
    ("content not text", '5', "", "content"),
    ("prompt cannot fit", f'"{"word " * 1000}"', ', "max_tokens": 512', "content"),
    ("max_tokens 0", '"hi"', ', "max_tokens": 0', "max_tokens"),
    ("max_tokens negative", '"hi"', ', "max_tokens": -3', "max_tokens"),
    ("max_tokens above the pool's", '"hi"', ', "max_tokens": 513', "max_tokens"),
    ("max_tokens fractional", '"hi"', ', "max_tokens": 1.5', "max_tokens"),
    ("max_tokens a string", '"hi"', ', "max_tokens": "5"', "max_tokens"),
    ("max_tokens huge", '"hi"', ', "max_tokens": 1' + "0" * 40, "max_tokens"),
    ("temperature NaN", '"hi"', ', "temperature": NaN', None),
    ("temperature Infinity", '"hi"', ', "temperature": -Infinity', None),
    ("temperature overflow", '"hi"', ', "temperature": 1e999', "temperature"),
    ("temperature negative", '"hi"', ', "temperature": -0.1', "temperature"),
    ("temperature absurd", '"hi"', ', "temperature": 1000000', "temperature"),
    ("temperature a string", '"hi"', ', "temperature": "hot"', "temperature"),
    ("top_p NaN", '"hi"', ', "top_p": NaN', None),
    ("top_p zero", '"hi"', ', "top_p": 0', "top_p"),
    ("top_p above 1", '"hi"', ', "top_p": 1.01', "top_p"),
    ("top_p negative", '"hi"', ', "top_p": -1', "top_p"),
    ("too many stops", '"hi"', ', "stop": ["a", "b", "c", "d", "e"]', "stop"),
    ("empty stop", '"hi"', ', "stop": [""]', "stop"),
    ("stop not text", '"hi"', ', "stop": [1]', "stop"),
    ("stop with a lone surrogate", '"hi"', ', "stop": ["a\\ud800"]', "stop"),
    ("stop a lone surrogate string", '"hi"', ', "stop": "\\udfff"', "stop"),
    ("stop with NUL", '"hi"', ', "stop": "a\\u0000"', "stop"),
    ("seed below 64 bits", '"hi"', ', "seed": -9223372036854775809', "seed"),
    ("seed too big", '"hi"', ', "seed": 9223372036854775808', "seed"),
    ("ignore_eos not a bool", '"hi"', ', "ignore_eos": "yes"', "ignore_eos"),
    ("unknown model", '"hi"', ', "model": "nope"', "model"),
    ("disabled model", '"hi"', ', "model": "retired"', "model"),
    ("model with NUL", '"hi"', ', "model": "a\\u0000"', "model"),
]
REST_ONLY = [("unknown tier", '"hi"', ', "tier": "urgent"', "tier"),
             ("the old name priority", '"hi"', ', "priority": "batch"', "priority")]
OPENAI_ONLY = [
    ("n above 8", '"hi"', ', "n": 9', "n"),
    ("tools", '"hi"', ', "tools": {"type": "function"}', "tools"),
    ("stream_options without stream", '"hi"', ', "stream_options": {"include_usage": true}', "stream_options"),
    ("two max token values", '"hi"', ', "max_tokens": 5, "max_completion_tokens": 6', "max_completion_tokens"),
]
OPENAI_PARAM = {"content": "messages[0].content"}


@pytest.fixture
def retired(db):
    return PoolFactory(name="retired", enabled=False)


@pytest.mark.parametrize("name, content, extra, field", CASES + REST_ONLY, ids=[c[0] for c in CASES + REST_ONLY])
def test_rest_message_refused(api_key, chat, retired, name, content, extra, field):
    before = row_counts()
    resp = key_client(api_key).post(f"/api/chats/{chat.pk}/messages/", '{"content": ' + content + extra + "}",
                                    content_type="application/json")
    err = assert_error(resp, 400, field=field)
    if field is None:  # refused by the JSON decoder itself
        assert err["code"] == "invalid_json" and "not a valid JSON number" in err["message"]
    assert row_counts() == before


@pytest.mark.parametrize("name, content, extra, field", CASES + OPENAI_ONLY, ids=[c[0] for c in CASES + OPENAI_ONLY])
def test_openai_completion_refused(api_key, pool, retired, name, content, extra, field):
    before = row_counts()
    body = ('{"model": "flagship", "messages": [{"role": "system", "content": "Be brief."}, '
            '{"role": "user", "content": ' + content + "}]" + extra + "}")
    resp = key_client(api_key).post("/v1/chat/completions", body, content_type="application/json")
    status = 404 if name in ("unknown model", "model with NUL") else 400
    param = OPENAI_PARAM.get(field, field).replace("[0]", "[1]") if field else None
    err = assert_openai_error(resp, status, param=param)
    assert err["type"] == "invalid_request_error"
    assert row_counts() == before  # not even the chat that would have held the history


def test_prompt_too_long_for_the_context_even_after_dropping_old_turns(api_key, chat):
    client = key_client(api_key)
    url = f"/api/chats/{chat.pk}/messages/"
    long_turn = "lorem ipsum " * 200  # ~800 estimated tokens: two of them do not fit 1024 together
    run = client.post(url, {"content": long_turn, "max_tokens": 100}, content_type="application/json").json()["run"]
    from chatsite.runs.models import GenerationRun

    GenerationRun.objects.filter(pk=run["id"]).update(status="completed")
    resp = client.post(url, {"content": long_turn, "max_tokens": 100}, content_type="application/json")
    assert resp.status_code == 202  # the old turn is dropped from the prompt
    assert GenerationRun.objects.get(pk=resp.json()["run"]["id"]).prompt_snapshot == [
        {"role": "user", "content": long_turn}]
    GenerationRun.objects.filter(pk=resp.json()["run"]["id"]).update(status="completed")
    before = row_counts()
    err = assert_error(client.post(url, {"content": long_turn * 2, "max_tokens": 100},
                                   content_type="application/json"), 400, "context_length_exceeded", "content")
    assert "shorten it" in err["message"]
    assert row_counts() == before


MESSAGE_SHAPES = [
    ("no messages", {"messages": []}, "messages"),
    ("messages not a list", {"messages": {"role": "user", "content": "hi"}}, "messages"),
    ("message not an object", {"messages": ["hi"]}, "messages[0]"),
    ("role an object", {"messages": [{"role": {}, "content": "hi"}]}, "messages[0].role"),
    ("role a list", {"messages": [{"role": ["user"], "content": "hi"}]}, "messages[0].role"),
    ("tool message answering no call", {"messages": [{"role": "tool", "content": "hi"}]}, "messages[0].tool_call_id"),
    ("no role", {"messages": [{"content": "hi"}]}, "messages[0].role"),
    ("no content", {"messages": [{"role": "user"}]}, "messages[0].content"),
    ("image part", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
     "messages[0].content"),
    ("part not an object", {"messages": [{"role": "user", "content": ["hi"]}]}, "messages[0].content"),
    ("assistant last with calls", {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]},
     "messages[1].tool_calls"),
    ("tool call without an id", {"messages": [{"role": "assistant", "content": None, "tool_calls": [{}]},
                                              {"role": "user", "content": "hi"}]}, "messages[0].tool_calls[0].id"),
    ("tool call arguments not JSON", {"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "f", "arguments": "{city: Paris"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]}, "messages[1].tool_calls[0].function.arguments"),
    ("tool result for an unknown call", {"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f",
                                                                                            "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "sunny"}]}, "messages[2].tool_call_id"),
    ("tool calls on a user message", {"messages": [{"role": "user", "content": "hi", "tool_calls": []}]},
     "messages[0].tool_calls"),
    ("legacy function_call in a message", {"messages": [{"role": "assistant", "content": "", "function_call": {
        "name": "f", "arguments": "{}"}}, {"role": "user", "content": "hi"}]}, "messages[0].function_call"),
    ("tools not a list", {"tools": {"type": "function"}}, "tools"),
    ("tool not a function", {"tools": [{"type": "code_interpreter"}]}, "tools[0].type"),
    ("tool name with spaces", {"tools": [{"type": "function", "function": {"name": "get weather"}}]},
     "tools[0].function.name"),
    ("tool name twice", {"tools": [{"type": "function", "function": {"name": "f"}},
                                   {"type": "function", "function": {"name": "f"}}]}, "tools[1].function.name"),
    ("tool parameters not a valid schema", {"tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"city": {"type": "town"}}}}}]},
     "tools[0].function.parameters"),
    ("tool parameters not an object schema", {"tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "string"}}}]}, "tools[0].function.parameters"),
    ("tool description not text", {"tools": [{"type": "function", "function": {"name": "f", "description": 5}}]},
     "tools[0].function.description"),
    ("tool_choice unknown", {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "any"},
     "tool_choice"),
    ("tool_choice names no tool", {"tools": [{"type": "function", "function": {"name": "f"}}],
                                   "tool_choice": {"type": "function", "function": {"name": "g"}}},
     "tool_choice.function.name"),
    ("parallel_tool_calls not a bool", {"tools": [{"type": "function", "function": {"name": "f"}}],
                                        "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ("legacy functions", {"functions": [{"name": "f"}]}, "functions"),
    ("legacy function_call", {"function_call": {"name": "f"}}, "function_call"),
    ("history NUL", {"messages": [{"role": "system", "content": "a\u0000"}, {"role": "user", "content": "hi"}]},
     "messages[0].content"),
    ("no model", {"model": None}, "model"),
    ("model not text", {"model": ["flagship"]}, "model"),
    ("n zero", {"n": 0}, "n"),
    ("n true", {"n": True}, "n"),
    ("stream not a bool", {"stream": "yes"}, "stream"),
    ("stream_options not an object", {"stream": True, "stream_options": []}, "stream_options"),
    ("include_usage not a bool", {"stream": True, "stream_options": {"include_usage": 1}}, "include_usage"),
    ("logprobs not a bool", {"logprobs": 1}, "logprobs"),
    ("top_logprobs without logprobs", {"top_logprobs": 2}, "top_logprobs"),
    ("top_logprobs above 20", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("top_logprobs negative", {"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ("top_logprobs fractional", {"logprobs": True, "top_logprobs": 1.5}, "top_logprobs"),
    ("logit_bias above 100", {"logit_bias": {"42": 101}}, "logit_bias"),
    ("logit_bias key not a token id", {"logit_bias": {"-1": 5}}, "logit_bias"),
    ("audio", {"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    ("user not text", {"user": 5}, "user"),
    ("top_k negative", {"top_k": -2}, "top_k"),
    ("top_k fractional", {"top_k": 1.5}, "top_k"),
    ("min_p above 1", {"min_p": 1.5}, "min_p"),
    ("frequency_penalty above 2", {"frequency_penalty": 2.5}, "frequency_penalty"),
    ("presence_penalty below -2", {"presence_penalty": -3}, "presence_penalty"),
    ("repetition_penalty zero", {"repetition_penalty": 0}, "repetition_penalty"),
    ("repetition_penalty text", {"repetition_penalty": "1.1"}, "repetition_penalty"),
    ("response format unknown type", {"response_format": {"type": "xml"}}, "response_format"),
    ("json_schema without its object", {"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
    ("json_schema without a name", {"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}},
     "response_format.json_schema.name"),
    ("json_schema schema not an object", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": ["type", "object"]}}}, "response_format.json_schema.schema"),
    ("json_schema not a valid schema", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "nonsense"}}}}, "response_format.json_schema.schema"),
    ("json_schema strict not a bool", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {}, "strict": "yes"}}}, "response_format.json_schema.strict"),
    ("tool_choice required", {"tool_choice": "required"}, "tool_choice"),
]


@pytest.mark.parametrize("name, fields, param", MESSAGE_SHAPES, ids=[c[0] for c in MESSAGE_SHAPES])
def test_openai_message_shapes_refused(api_key, pool, name, fields, param):
    body = {"model": "flagship", "messages": [{"role": "user", "content": "hi"}], **fields}
    resp = key_client(api_key).post("/v1/chat/completions", body, content_type="application/json")
    assert_openai_error(resp, 400, param=param)
    assert row_counts() == (0, 0, 0)
