"""The fake engine reports what vLLM reports beyond the text: prefix-cache hits, the
prompt's log probabilities, token ids (platform tests read them through the stack)."""
import asyncio

from inference.fake_backend import CharTokenizer, FakeBackend
from inference.fake_details import BLOCK_TOKENS, PrefixCache, prompt_logprobs
from inference.types import GenerationRequest


def test_a_prompt_seen_before_is_served_from_the_cache_but_its_last_token():
    cache, prompt = PrefixCache(), list(range(40))
    assert cache.hits(prompt) == 0
    assert cache.hits(prompt) == 2 * BLOCK_TOKENS  # full blocks only
    assert cache.hits(prompt[:32]) == BLOCK_TOKENS  # the last token is always computed
    assert cache.hits([99] + prompt[1:]) == 0  # a block counts only after its whole prefix


def test_the_prompts_log_probabilities_start_with_none_and_name_each_token():
    tokenizer = CharTokenizer()
    ids = tokenizer.encode("The loop runs.")
    figures = prompt_logprobs(tokenizer, GenerationRequest("r", ids, max_tokens=1, prompt_logprobs=2))
    assert figures[0] is None and len(figures) == len(ids)
    assert "".join(f.token for f in figures[1:]) == tokenizer.decode(ids[1:])
    assert [f.token_id for f in figures[1:]] == ids[1:]
    assert all(f.logprob < 0 and len(f.top) == 2 and f.rank >= 1 for f in figures[1:])
    assert all((f.rank == 1) == (f.top[0][0] == f.token_id) for f in figures[1:])
    assert figures == prompt_logprobs(tokenizer, GenerationRequest("r", ids, max_tokens=1, prompt_logprobs=2))


def test_a_detailed_request_gets_ids_prompt_logprobs_and_cache_hits_in_its_chunks():
    async def run(request):
        backend, chunks = FakeBackend(step_seconds=0), []
        await backend.add(request, chunks.append)
        await backend.add(request.__class__(**{**request.__dict__, "request_id": "again"}), chunks.append)
        while sum(c.finished for c in chunks) < 2:
            await asyncio.sleep(0.01)
        return chunks

    prompt = CharTokenizer().encode("x" * 120)  # 40 tokens
    chunks = asyncio.run(run(GenerationRequest("r", prompt, max_tokens=5, ignore_eos=True, prompt_logprobs=0,
                                               token_ids=True)))
    first = [c for c in chunks if c.prompt_logprobs is not None]
    assert len(first) == 2 and all(len(c.prompt_logprobs) == 40 for c in first)
    assert sum(len(c.token_ids) for c in chunks) == 10 and all(c.logprobs is None for c in chunks)
    assert sorted(c.num_cached_tokens for c in chunks if c.finished) == [0, 32]
