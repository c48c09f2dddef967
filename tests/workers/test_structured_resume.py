"""A constrained reply that another attempt already began is carried on under its grammar
(the fake engine, as vLLM with inference.carried_grammar, goes on from the reply so far
only when told its ids): the reply ends as the one whole value an uncut run writes. A
reply so far that the prompt cannot hand to the grammar as written ends with a clear
error instead."""
import json
from types import SimpleNamespace
from unittest import mock

import pytest

from chatsite.openai_api.completions.request import parse_completion_request
from chatsite.openai_api.completions.services import completion_submit
from chatsite.runs.admission.credentials import key_authenticate
from chatsite.runs.dispatch import run_dispatch
from chatsite.runs.models import GenerationRun
from chatsite.runs.stream import log as stream_log
from inference.fake_backend import PIECE_CHARS, CharTokenizer
from inference.prompt import assemble
from tests.runs.helpers import wait_terminal, xadd_tokens
from workers.generation import _carried_ids

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"},
                                           "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["city", "n", "tags"]}


def _submit(api_key, response_format, *, dispatch: bool):
    body = {"model": "flagship", "max_tokens": 60, "response_format": response_format, "seed": 5,
            "messages": [{"role": "user", "content": "Answer in JSON."}]}
    if dispatch:
        return completion_submit(key=key_authenticate(api_key), request=parse_completion_request(body)).run
    with mock.patch("chatsite.runs.admission.door.run_dispatch_choices"):  # no task yet: an attempt "began" first
        return completion_submit(key=key_authenticate(api_key), request=parse_completion_request(body)).run


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("response_format", [
    {"type": "json_object"}, {"type": "json_schema", "json_schema": {"name": "r", "schema": SCHEMA}}])
def test_a_begun_json_reply_is_carried_on_to_the_same_whole_value(fake_workers, pool, api_key, response_format):
    whole = wait_terminal(_submit(api_key, response_format, dispatch=True).pk).assistant_message.content
    pieces = [whole[i:i + PIECE_CHARS] for i in range(0, len(whole), PIECE_CHARS)]
    run = _submit(api_key, response_format, dispatch=False)
    xadd_tokens(run.pk, pieces[:len(pieces) // 2])  # what the first attempt streamed before its worker died
    run_dispatch(run)
    saved = wait_terminal(run.pk)
    assert saved.status == "completed" and saved.assistant_message.content == whole
    json.loads(saved.assistant_message.content)
    assert stream_log.read(run.pk).text == whole


@pytest.mark.django_db(transaction=True)
def test_a_begun_text_reply_is_carried_on(fake_workers, pool, api_key):
    run = _submit(api_key, None, dispatch=False)
    xadd_tokens(run.pk, ["The", " loop"])
    run_dispatch(run)
    saved = wait_terminal(run.pk)
    assert saved.status == "completed" and saved.assistant_message.content.startswith("The loop")


def test_the_ids_given_to_the_grammar_are_the_reply_so_far_or_none_when_the_prompt_merged_them():
    tokenizer = CharTokenizer()
    rt = SimpleNamespace(host=SimpleNamespace(decode=tokenizer.decode))
    run = GenerationRun(sampling={"response_format": {"type": "json_object"}})
    asked = [{"role": "user", "content": "Hi"}]

    def ids(continuation, so_far):
        plan = assemble(tokenizer, asked, max_prompt_tokens=1000, continuation=continuation, carried=so_far)
        return _carried_ids(rt, run, plan, so_far)

    assert tokenizer.decode(list(ids("", '{"city": "Pa'))) == '{"city": "Pa'
    assert ids("abc", '{"city') == tuple(tokenizer.encode('{"city'))  # a prefill of whole tokens: kept apart
    assert ids("ab", '{"city') is None  # the prefill's last token holds the reply's first bytes
    assert ids("", "") == () and _carried_ids(rt, GenerationRun(sampling={}), None, "The loop") == ()
