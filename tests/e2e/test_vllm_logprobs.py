"""Log probabilities on the real engine (SmolLM2-135M-Instruct on vLLM's CPU build):
/v1/chat/completions with logprobs and top_logprobs gives the model's own figures,
streamed and whole, and /v1/completions its legacy shape."""
import math

import pytest

from tests.conftest import VLLM_POOL
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.vllm]

ASK = [{"role": "user", "content": "Name three colours."}]


def _check_real(item, k: int):
    assert isinstance(item.logprob, float) and item.logprob <= 0 and math.exp(item.logprob) <= 1
    top = [t.logprob for t in item.top_logprobs]
    assert len(top) == k and top == sorted(top, reverse=True) and all(f <= 0 for f in top)
    assert sum(math.exp(f) for f in top) <= 1 + 1e-4  # a distribution's top k, not made-up figures


def test_real_logprobs_greedy_and_streamed(live_url, vllm_pool, api_key):
    client = v1_client(live_url, api_key, timeout=180)
    out = client.chat.completions.create(model=VLLM_POOL, messages=ASK, max_tokens=16, temperature=0.0,
                                         logprobs=True, top_logprobs=5)
    run = wait_terminal(int(out.id.removeprefix("chatcmpl-")), timeout=120)
    content = out.choices[0].logprobs.content
    assert len(content) == out.usage.completion_tokens == run.completion_tokens > 0
    assert any(t.logprob < -1e-3 for t in content) or any(t.top_logprobs[1].logprob < 0 for t in content)
    for item in content:
        _check_real(item, 5)
        # Greedy: the sampled token is the likeliest, present in the top list with its own figure.
        assert item.top_logprobs[0].token == item.token
        assert abs(item.top_logprobs[0].logprob - item.logprob) < 1e-5
    assert "".join(t.token for t in content) == out.choices[0].message.content
    assert run.logprobs is not None and len(run.logprobs) == run.completion_tokens

    chunks = list(client.chat.completions.create(model=VLLM_POOL, messages=ASK, max_tokens=16, temperature=0.8,
                                                 seed=3, logprobs=True, top_logprobs=2, stream=True))
    pieces = [c for c in chunks if c.choices and c.choices[0].delta.content]
    streamed = [t for c in pieces for t in c.choices[0].logprobs.content]
    saved = wait_terminal(int(chunks[0].id.removeprefix("chatcmpl-")), timeout=120)
    assert len(streamed) == saved.completion_tokens > 0
    for item in streamed:  # sampled at 0.8: the token need not rank first, but its figure is real
        _check_real(item, 2)
        if item.token in {t.token for t in item.top_logprobs}:
            assert next(t.logprob for t in item.top_logprobs if t.token == item.token) == pytest.approx(item.logprob)
        else:
            assert item.logprob <= item.top_logprobs[-1].logprob + 1e-5

    text = client.completions.create(model=VLLM_POOL, prompt="def add(a, b):\n    return", max_tokens=8,
                                     temperature=0.0, logprobs=3)
    lp = text.choices[0].logprobs
    assert len(lp.tokens) == text.usage.completion_tokens == len(lp.token_logprobs) == len(lp.top_logprobs)
    assert all(f <= 0 for f in lp.token_logprobs)
    for token, figure, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert max(top.values()) == pytest.approx(figure, abs=1e-5) and top.get(token) == pytest.approx(figure)
