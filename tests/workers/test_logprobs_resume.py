"""A run with logprobs that another attempt already began: the next worker carries the
reply on, and the saved logprobs are the first attempt's for its tokens, then the
next attempt's, one per token (none lost, none twice)."""
from unittest import mock

import pytest

from chatsite import redis_keys
from chatsite.openai_api.completions.request import parse_completion_request
from chatsite.openai_api.completions.services import completion_submit
from chatsite.redis_client import get_redis
from chatsite.runs.admission.credentials import key_authenticate
from chatsite.runs.dispatch import run_dispatch
from chatsite.runs.stream import codec
from tests.runs.helpers import wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)

CARRIED = [["The", -0.25, [["The", -0.25], ["A", -1.75]]], [" loop", -0.5, [[" loop", -0.5], [" code", -1.5]]]]


def test_the_carried_tokens_logprobs_are_kept_once(fake_workers, pool, api_key):
    body = {"model": "flagship", "max_tokens": 20, "logprobs": True, "top_logprobs": 2,
            "messages": [{"role": "user", "content": "Explain loops."}]}
    with mock.patch("chatsite.runs.admission.door.run_dispatch_choices"):  # no task yet: an attempt "began" first
        run = completion_submit(key=key_authenticate(api_key), request=parse_completion_request(body)).run
    key = redis_keys.run_stream(run.pk)
    entry = codec.logprobs_token_fields(seq=0, n=2, text="The loop", attempt=1, logprobs=CARRIED)
    get_redis().xadd(key, entry)
    get_redis().xadd(key, entry)  # the first attempt's retried write: a repeat, skipped by seq
    run_dispatch(run)
    saved = wait_terminal(run.pk)
    assert saved.status == "completed" and saved.assistant_message.content.startswith("The loop")
    assert saved.logprobs[:2] == CARRIED
    assert len(saved.logprobs) == saved.completion_tokens > 2
    assert "".join(lp[0] for lp in saved.logprobs) == saved.assistant_message.content
    assert all(len(lp[2]) == 2 for lp in saved.logprobs)
