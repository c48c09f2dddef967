"""The real engine carries on a constrained reply another attempt began (issue 43 §3): a
JSON Schema reply and a `tool_choice: required` call, cut at random points of the reply
the engine writes uncut, are written to the run's stream as a dead worker's attempt would
have left them; the worker that takes the run up ends it as valid JSON of its schema,
beginning with what was carried, the text any client streams (inference.carried_grammar:
vLLM's grammar advanced over the reply so far; without it the engine writes a second
value after the first one's beginning)."""
import random
from unittest import mock

import pytest

from bench.structured_shapes import CITY, SHAPES
from chatsite.openai_api.completions.request import parse_completion_request
from chatsite.openai_api.completions.services import completion_submit
from chatsite.runs.admission.credentials import key_authenticate
from chatsite.runs.dispatch import run_dispatch
from chatsite.runs.stream import log as stream_log
from tests.conftest import VLLM_POOL
from tests.runs.helpers import wait_terminal, xadd_tokens

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.vllm]


def _submit(api_key, shape: str, *, dispatch: bool):
    body = {"model": VLLM_POOL, "max_tokens": 120, "temperature": 0.0, **CITY.body(shape)}
    submit = lambda: completion_submit(key=key_authenticate(api_key), request=parse_completion_request(body)).run  # noqa: E731
    if dispatch:
        return submit()
    with mock.patch("chatsite.runs.admission.door.run_dispatch_choices"):  # taken up below, its stream begun
        return submit()


@pytest.mark.parametrize("shape", SHAPES)
def test_a_constrained_reply_cut_anywhere_is_carried_on_to_valid_json(live_url, vllm_pool, api_key, shape):
    whole = wait_terminal(_submit(api_key, shape, dispatch=True).pk, timeout=180).assistant_message.content
    assert CITY.problem(shape, whole) is None, whole
    rng = random.Random(f"43.3-{shape}")
    for cut in sorted({rng.randint(1, len(whole) - 1), rng.randint(1, len(whole) - 1), len(whole)}):  # and all of it
        run = _submit(api_key, shape, dispatch=False)
        pieces = [whole[i:i + 4] for i in range(0, cut, 4)]  # the first attempt's entries, a token each
        xadd_tokens(run.pk, pieces)
        run_dispatch(run)
        saved = wait_terminal(run.pk, timeout=180)
        text = saved.assistant_message.content if saved.assistant_message else None
        assert saved.status == "completed", (cut, whole, saved.error)
        assert text.startswith(whole[:cut]) and stream_log.read(run.pk).text == text, (cut, whole, text)
        assert CITY.problem(shape, text) is None, (cut, whole, text)
