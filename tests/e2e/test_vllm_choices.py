"""n choices on the real engine: one vLLM request per choice, each with its own seed,
streamed interleaved and saved byte for byte."""
import pytest

from tests.conftest import VLLM_POOL
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.vllm]


def test_three_choices_from_vllm_differ_and_stream_as_saved(live_url, vllm_pool, api_key):
    client = v1_client(live_url, api_key, timeout=180)
    ask = {"model": VLLM_POOL, "max_tokens": 24, "temperature": 1.0, "seed": 3, "n": 3,
           "messages": [{"role": "user", "content": "Name a fruit and say why you like it."}]}
    chunks = list(client.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True}))
    texts = {}
    for c in chunks:
        for choice in c.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
    first = int(chunks[0].id.removeprefix("chatcmpl-"))
    runs = [wait_terminal(first, timeout=120)]
    runs += [wait_terminal(r.pk, timeout=120) for r in runs[0].other_choices.order_by("choice_index")]
    assert sorted(texts) == [0, 1, 2] and len(runs) == 3
    assert [texts[i] for i in range(3)] == [r.assistant_message.content for r in runs]
    assert all(r.status == "completed" and r.completion_tokens > 0 for r in runs)
    assert len(set(texts.values())) > 1  # seeds differ per choice (temperature 1: they do not agree)
    assert len({r.seed for r in runs}) == 3 and len({r.worker for r in runs}) == 1
    usage = chunks[-1].usage
    assert usage.prompt_tokens == runs[0].prompt_tokens > 0
    assert usage.completion_tokens == sum(r.completion_tokens for r in runs)
