"""A JSON-constrained reply that another attempt already began is not carried on (the
grammar would restart mid-value): the worker ends it with a clear error instead."""
from unittest import mock

import pytest

from chatsite.openai_api.completions.request import parse_completion_request
from chatsite.openai_api.completions.services import completion_submit
from chatsite.runs.admission.credentials import key_authenticate
from chatsite.runs.dispatch import run_dispatch
from chatsite.runs.stream import log as stream_log
from tests.runs.helpers import wait_terminal, xadd_tokens

pytestmark = pytest.mark.django_db(transaction=True)


def _submit(api_key, response_format):
    body = {"model": "flagship", "max_tokens": 20, "response_format": response_format,
            "messages": [{"role": "user", "content": "Answer in JSON."}]}
    with mock.patch("chatsite.runs.admission.door.run_dispatch_choices"):  # no task yet: an attempt "began" first
        return completion_submit(key=key_authenticate(api_key), request=parse_completion_request(body)).run


def test_a_begun_json_reply_ends_with_structured_output_interrupted(fake_workers, pool, api_key):
    run = _submit(api_key, {"type": "json_object"})
    xadd_tokens(run.pk, ['{"a', '": '])  # what the first attempt streamed before its worker died
    run_dispatch(run)
    saved = wait_terminal(run.pk)
    assert saved.status == "failed" and "send the request again" in saved.error
    assert stream_log.read(run.pk).end.code == "structured_output_interrupted"


def test_a_begun_text_reply_is_carried_on(fake_workers, pool, api_key):
    run = _submit(api_key, None)
    xadd_tokens(run.pk, ["The", " loop"])
    run_dispatch(run)
    saved = wait_terminal(run.pk)
    assert saved.status == "completed" and saved.assistant_message.content.startswith("The loop")
