"""Every chat-completions parameter is honoured or refused by name: the honoured ones
reach the saved run's sampling (what the worker builds the engine request from)."""
import json

import pytest

from chatsite.errors import InvalidInput
from chatsite.openai_api.completions.request import parse_completion_request
from chatsite.openai_api.completions.services import completion_submit
from chatsite.runs.admission.credentials import key_authenticate
from chatsite.runs.models import GenerationRun
from tests.api.helpers import assert_openai_error, key_client, row_counts
from tests.factories import queueing_pool

pytestmark = pytest.mark.django_db

ASK = {"model": "flagship", "messages": [{"role": "user", "content": "Hi"}]}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.fixture
def key(api_key):
    return key_authenticate(api_key)  # the key as the /v1 views read it


def _submit(key, **fields) -> GenerationRun:
    return completion_submit(key=key, request=parse_completion_request({**ASK, **fields})).run


def test_sampling_knobs_are_saved_on_the_run(key, pool):
    run = _submit(key, top_k=40, min_p=0.05, frequency_penalty=0.5, presence_penalty=-0.25,
                  repetition_penalty=1.1, user="user-1234")
    saved = GenerationRun.objects.get(pk=run.pk).sampling
    assert {k: saved[k] for k in ("top_k", "min_p", "frequency_penalty", "presence_penalty",
                                  "repetition_penalty")} == {
        "top_k": 40, "min_p": 0.05, "frequency_penalty": 0.5, "presence_penalty": -0.25, "repetition_penalty": 1.1}
    assert saved["response_format"] is None


def test_unset_knobs_are_the_engine_defaults(key, pool):
    saved = GenerationRun.objects.get(pk=_submit(key, top_k=-1).pk).sampling
    assert (saved["top_k"], saved["min_p"], saved["frequency_penalty"], saved["presence_penalty"],
            saved["repetition_penalty"]) == (0, 0.0, 0.0, 0.0, 1.0)


def test_response_formats_are_saved_in_the_platforms_shape(key, pool):
    fmt = {"type": "json_schema", "json_schema": {"name": "place", "schema": SCHEMA, "strict": True}}
    run = _submit(key, response_format=fmt)
    assert GenerationRun.objects.get(pk=run.pk).sampling["response_format"] == {
        "type": "json_schema", "name": "place", "schema": SCHEMA}
    GenerationRun.objects.filter(pk=run.pk).update(status="completed")
    run = _submit(key, response_format={"type": "json_object"})
    assert GenerationRun.objects.get(pk=run.pk).sampling["response_format"] == {"type": "json_object"}
    GenerationRun.objects.filter(pk=run.pk).update(status="completed")
    run = _submit(key, response_format={"type": "text"})
    assert GenerationRun.objects.get(pk=run.pk).sampling["response_format"] is None


def test_tools_are_refused_naming_the_pools_chat_template(api_key, db, settings):
    smollm2 = settings.CHATSITE["DEMO_MODELS_DIR"] / "smollm2-135m-instruct"
    assert "tools" not in json.loads((smollm2 / "tokenizer_config.json").read_text())["chat_template"]
    queueing_pool("smollm2-tools", model=str(smollm2))  # a row of its own: a session may hold a flagship already
    tool = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}
    resp = key_client(api_key).post("/v1/chat/completions", {**ASK, "model": "smollm2-tools", "tools": [tool]},
                                    content_type="application/json")
    err = assert_openai_error(resp, 400, param="tools")
    assert "chat template of model 'smollm2-tools' has no tools" in err["message"]
    assert row_counts() == (0, 0, 0)


def test_tools_are_taken_where_the_models_own_template_reads_them(key, db, tmp_path):
    template = "{% if tools %}{{ tools | tojson }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    queueing_pool("template-with-tools", model=str(tmp_path))
    tool = {"type": "function", "function": {"name": "weather", "parameters": SCHEMA}}
    run = _submit(key, model="template-with-tools", tools=[tool], tool_choice="required")
    saved = GenerationRun.objects.get(pk=run.pk).sampling
    assert saved["tools"] == {"definitions": [tool], "choice": "required", "parallel": True}
    assert saved["response_format"]["schema"]["items"]["anyOf"][0]["properties"] == {
        "name": {"const": "weather"}, "arguments": SCHEMA}


def test_a_pools_own_chat_template_file_decides_and_constrains_a_named_call(key, db):
    queueing_pool("flagship", chat_template="smollm2-tools.jinja")
    tool = {"type": "function", "function": {"name": "weather", "description": "Weather", "parameters": SCHEMA}}
    run = _submit(key, tools=[tool], tool_choice={"type": "function", "function": {"name": "weather"}},
                  parallel_tool_calls=False)
    saved = GenerationRun.objects.get(pk=run.pk).sampling
    assert saved["tools"] == {"definitions": [tool], "choice": {"name": "weather"}, "parallel": False}
    # The reply is the arguments object: vLLM structured outputs hold it to the function's schema.
    assert saved["response_format"] == {"type": "json_schema", "name": "tool_arguments", "schema": SCHEMA}


def test_tool_choice_none_offers_no_tools(key, db):
    queueing_pool("flagship", chat_template="smollm2-tools.jinja")
    tool = {"type": "function", "function": {"name": "weather"}}
    run = _submit(key, tools=[tool], tool_choice="none")
    assert "tools" not in GenerationRun.objects.get(pk=run.pk).sampling


def test_a_too_large_schema_is_refused(key, pool):
    fmt = {"type": "json_schema", "json_schema": {"name": "big", "schema": {"description": "x" * 40_000}}}
    with pytest.raises(InvalidInput) as info:
        _submit(key, response_format=fmt)
    assert info.value.field == "response_format.json_schema.schema"
    assert GenerationRun.objects.count() == 0


def test_tools_that_leave_no_room_in_the_context_are_refused_naming_tools(key, db):
    queueing_pool("flagship", chat_template="smollm2-tools.jinja", context_length=1024)
    tool = {"type": "function", "function": {"name": "weather", "description": "x " * 2000, "parameters": SCHEMA}}
    with pytest.raises(InvalidInput) as info:
        _submit(key, tools=[tool], max_tokens=40)
    assert (info.value.field, info.value.code) == ("tools", "context_length_exceeded")
    assert GenerationRun.objects.count() == 0  # the chat and the run were rolled back
    _submit(key, tools=[{**tool, "function": {**tool["function"], "description": "x " * 100}}], max_tokens=40)
