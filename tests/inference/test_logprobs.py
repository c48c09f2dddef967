"""Log probabilities in inference/: the fake engine's are deterministic and plausible,
and vLLM's per-position dicts become one TokenLogprob per token (no engine needed)."""
import asyncio
import math
from types import SimpleNamespace

from inference.fake_backend import FakeBackend, word_logprobs
from inference.types import GenerationRequest, TokenLogprob
from inference.vllm_backend import UNKNOWN_LOGPROB, token_logprobs


def _request(k, seed=1, max_tokens=30):
    return GenerationRequest("r", [5, 6, 7], max_tokens=max_tokens, seed=seed, logprobs=k)


def test_the_fake_engines_logprobs_are_a_pure_function_and_plausible():
    backend = FakeBackend()
    words = backend.reply_words(_request(5))
    lps = word_logprobs(_request(5), words)
    assert lps == word_logprobs(_request(5), words) != word_logprobs(_request(5, seed=2), words)
    assert [lp.token for lp in lps] == words
    for lp in lps:
        assert lp.logprob < 0 and len(lp.top) == 5
        figures = [f for _, f in lp.top]
        assert figures == sorted(figures, reverse=True)
        assert sum(math.exp(f) for _, f in lp.top) < 1
        if lp.token in dict(lp.top):
            assert dict(lp.top)[lp.token] == lp.logprob
        else:
            assert lp.logprob < figures[-1]  # not among the top: less likely than all of them
    assert all(lp.top == () for lp in word_logprobs(_request(0), words))


def test_the_fake_engine_emits_one_logprob_per_token_only_when_asked():
    async def collect(request):
        backend, chunks, done = FakeBackend(step_seconds=0), [], asyncio.Event()

        def emit(chunk):
            chunks.append(chunk)
            if chunk.finished:
                done.set()
        await backend.add(request, emit)
        await asyncio.wait_for(done.wait(), 5)
        return chunks

    asked = asyncio.run(collect(_request(2)))
    assert all(len(c.logprobs) == c.num_tokens == 1 and c.logprobs[0].token == c.text for c in asked)
    plain = asyncio.run(collect(GenerationRequest("r", [5, 6, 7], max_tokens=30, seed=1)))
    assert [c.text for c in plain] == [c.text for c in asked] and all(c.logprobs is None for c in plain)


def _lp(logprob, rank, token):
    return SimpleNamespace(logprob=logprob, rank=rank, decoded_token=token)


def test_vllms_positions_become_the_sampled_tokens_figure_and_the_top_k_by_rank():
    positions = [
        {7: _lp(-0.2, 1, " the"), 9: _lp(-1.9, 2, " a")},  # sampled token ranks first
        {4: _lp(-3.5, 6, " loop"), 1: _lp(-0.4, 1, " code"), 2: _lp(-1.2, 2, " list")},  # sampled outside the top 2
    ]
    out = token_logprobs([7, 4], positions, 2)
    assert out == (TokenLogprob(" the", -0.2, ((" the", -0.2), (" a", -1.9))),
                   TokenLogprob(" loop", -3.5, ((" code", -0.4), (" list", -1.2))))
    assert token_logprobs([7], positions[:1], 0) == (TokenLogprob(" the", -0.2, ()),)
    assert token_logprobs([7, 8], positions[:1], 1)[1] == TokenLogprob("", UNKNOWN_LOGPROB, ())  # one per token
    masked = token_logprobs([3], [{3: _lp(float("-inf"), 9, "x"), 1: _lp(float("nan"), 1, "y")}], 1)
    assert masked == (TokenLogprob("x", UNKNOWN_LOGPROB, (("y", UNKNOWN_LOGPROB),)),)  # JSON has no -Infinity
