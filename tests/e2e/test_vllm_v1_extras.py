"""What the /v1 extras do to the real model (SmolLM2-135M-Instruct on vLLM's CPU build),
through the official `openai` package: logit_bias steers it, a prefill is carried on, the
prompt's log probabilities score a sentence, the prefix cache's hits are reported, and
vLLM's constraints (regex, choice, grammar, allowed_token_ids, min_tokens) hold; a
grammar vLLM cannot compile is a 400."""
import re

import openai
import pytest

from tests.conftest import VLLM_POOL
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.vllm]

ASK = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture
def client(live_url, vllm_pool, api_key):
    return v1_client(live_url, api_key, timeout=180)


def _ids(out) -> list[int]:
    return out.model_dump()["choices"][0]["token_ids"]


def test_logit_bias_bans_and_forces_tokens(client):
    greedy = client.chat.completions.create(model=VLLM_POOL, messages=ASK, max_tokens=4, temperature=0,
                                            extra_body={"return_token_ids": True})
    first = _ids(greedy)[0]
    banned = client.chat.completions.create(model=VLLM_POOL, messages=ASK, max_tokens=4, temperature=0,
                                            logit_bias={str(first): -100}, extra_body={"return_token_ids": True})
    assert first not in _ids(banned)
    forced = client.chat.completions.create(model=VLLM_POOL, messages=ASK, max_tokens=3, temperature=0,
                                            logit_bias={"330": 100}, extra_body={"return_token_ids": True})
    assert _ids(forced) == [330, 330, 330]
    with pytest.raises(openai.BadRequestError) as refused:  # the model's vocabulary has 49,152 tokens
        client.chat.completions.create(model=VLLM_POOL, messages=ASK, max_tokens=3, logit_bias={"49152": 1})
    assert refused.value.body["param"] == "logit_bias"


def test_a_prefill_is_carried_on_by_the_model(client):
    prefill = [*ASK, {"role": "assistant", "content": "The capital of France is"}]
    out = client.chat.completions.create(model=VLLM_POOL, messages=prefill, max_tokens=8, temperature=0)
    text = out.choices[0].message.content
    assert "Paris" in text and not text.lstrip().startswith("The capital")  # it goes on from the prefill
    echoed = client.chat.completions.create(model=VLLM_POOL, messages=prefill, max_tokens=8, temperature=0,
                                            extra_body={"echo": True})
    assert echoed.choices[0].message.content == "The capital of France is" + text
    alone = client.chat.completions.create(model=VLLM_POOL, max_tokens=8, temperature=0,
                                           messages=[{"role": "system", "content": "Greet the user warmly."}])
    assert alone.choices[0].message.content.strip() != ""


def test_the_prompts_log_probabilities_score_a_sentence(client):
    def score(prompt: str) -> tuple[float, object]:
        out = client.completions.create(model=VLLM_POOL, prompt=prompt, max_tokens=1, temperature=0, echo=True,
                                        logprobs=1)
        lp = out.choices[0].logprobs
        n = out.usage.prompt_tokens
        assert lp.token_logprobs[0] is None and len(lp.tokens) == n + 1 and "".join(lp.tokens) == out.choices[0].text
        return sum(lp.token_logprobs[1:n]), out

    sensible, out = score("The cat sat on the mat.")
    assert sensible > score("mat the on sat cat The.")[0]
    assert out.choices[0].text.startswith("The cat sat on the mat.")
    run = wait_terminal(int(out.id.removeprefix("cmpl-")))
    assert len(run.details["prompt_logprobs"]) == out.usage.prompt_tokens  # kept: a replay reads the same


def test_the_prefix_caches_hits_are_the_usages_cached_tokens(client):
    long = [{"role": "user", "content": "Read this and say OK. " + "The loop reads each item in order. " * 30}]
    client.chat.completions.create(model=VLLM_POOL, messages=long, max_tokens=2, temperature=0)
    again = client.chat.completions.create(model=VLLM_POOL, messages=long, max_tokens=2, temperature=0)
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert 0 < cached < again.usage.prompt_tokens


def test_vllms_constraints_hold(client):
    digits = client.chat.completions.create(model=VLLM_POOL, messages=ASK, max_tokens=10, extra_body={
        "structured_outputs": {"regex": "[0-9]{3}"}})
    assert re.fullmatch("[0-9]{3}", digits.choices[0].message.content)
    picked = client.chat.completions.create(model=VLLM_POOL, messages=ASK, max_tokens=10, extra_body={
        "structured_outputs": {"choice": ["Paris", "Rome"]}})
    assert picked.choices[0].message.content in ("Paris", "Rome")
    grammar = client.chat.completions.create(model=VLLM_POOL, messages=ASK, max_tokens=10, extra_body={
        "structured_outputs": {"grammar": 'root ::= "yes" | "no"'}})
    assert grammar.choices[0].message.content in ("yes", "no")
    allowed = client.chat.completions.create(model=VLLM_POOL, messages=ASK, max_tokens=5, extra_body={
        "allowed_token_ids": [330, 331], "return_token_ids": True})
    assert set(_ids(allowed)) <= {330, 331}
    long = client.chat.completions.create(model=VLLM_POOL, messages=[{"role": "user", "content": "Say hi."}],
                                          max_tokens=40, temperature=0, extra_body={"min_tokens": 30})
    assert long.usage.completion_tokens >= 30
    with pytest.raises(openai.BadRequestError) as refused:  # the engine cannot compile it: the client's mistake
        client.chat.completions.create(model=VLLM_POOL, messages=ASK, max_tokens=5, extra_body={
            "structured_outputs": {"grammar": "root ::= ("}})
    assert refused.value.status_code == 400 and refused.value.body["code"] == "invalid_request"


def test_a_negative_seed_repeats_its_reply(client):
    a, b = (client.chat.completions.create(model=VLLM_POOL, messages=ASK, max_tokens=12, temperature=1.0, seed=-7)
            for _ in range(2))
    assert a.choices[0].message.content == b.choices[0].message.content
