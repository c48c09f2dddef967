"""What the fake engine reports beyond a reply's text, as vLLM reports it: each token's
id, the prompt's log probabilities, tokens named by id, and how many prompt tokens
its prefix cache served. Each is a pure function of the request (the cache: of the
requests before it), so platform tests can check what reaches the client."""
import hashlib
import math
import random
from array import array
from collections import OrderedDict

from inference.types import GenerationRequest, PromptLogprob, TokenLogprob

BLOCK_TOKENS = 16  # vLLM's default prefix-cache block
MAX_CACHED_BLOCKS = 50_000
_ALTERNATIVES = ("the", "a", "loop", "value", "code", "list", "and", "is")


def word_token_id(word: str) -> int:
    """The fake vocabulary's id of a generated word (or piece of JSON)."""
    return int.from_bytes(hashlib.sha256(word.encode()).digest()[:3], "big")


def named_by_id(items, ids) -> list[TokenLogprob]:
    """Log probabilities with every token named "token_id:N" (vLLM's return_tokens_as_token_ids)."""
    return [TokenLogprob(f"token_id:{token_id}", item.logprob,
                         tuple((f"token_id:{word_token_id(alt)}", lp) for alt, lp in item.top))
            for item, token_id in zip(items, ids)]


def prompt_logprobs(tokenizer, request: GenerationRequest) -> tuple:
    """None for the prompt's first token, then each token's log probability, its rank,
    and the request's `prompt_logprobs` likeliest tokens, from a softmax whose weights
    depend only on the prompt up to that token."""
    ids, k = request.prompt_token_ids, request.prompt_logprobs
    out: list = [None] if ids else []
    context = hashlib.sha256(str(ids[:1]).encode())  # the prompt so far, hashed as it grows
    for i in range(1, len(ids)):
        token = tokenizer.decode([ids[i]])
        rng = random.Random(f"{context.hexdigest()}:{ids[i]}")
        context.update(f",{ids[i]}".encode())
        candidates = {word_token_id(w): w for w in _ALTERNATIVES if w != token}
        weights = {t: rng.random() * 3.0 for t in candidates}
        candidates[ids[i]], weights[ids[i]] = token, rng.random() * 3.0 + 1.0
        norm = math.log(sum(math.exp(v) for v in weights.values()))
        ranked = sorted(weights, key=lambda t: -weights[t])
        out.append(PromptLogprob(ids[i], token, weights[ids[i]] - norm, ranked.index(ids[i]) + 1,
                                 tuple((t, candidates[t], weights[t] - norm) for t in ranked[:k])))
    return tuple(out)


class PrefixCache:
    """The prompts' full blocks an engine has computed, by the hash of the prompt up to
    each block's end, oldest forgotten first; as vLLM's, at least the prompt's last
    token is always computed."""

    def __init__(self, max_blocks: int = MAX_CACHED_BLOCKS):
        self._blocks: OrderedDict[bytes, None] = OrderedDict()
        self._max = max_blocks

    def hits(self, token_ids: list[int]) -> int:
        """The prompt tokens served from the cache; then the prompt's blocks are cached."""
        hashes = self._hashes(token_ids)
        cached = 0
        while cached < len(hashes) and hashes[cached] in self._blocks:
            cached += 1
        self._keep(hashes)
        return min(cached * BLOCK_TOKENS, (len(token_ids) - 1) // BLOCK_TOKENS * BLOCK_TOKENS)

    def remember(self, token_ids: list[int]) -> None:
        """Cache a sequence's full blocks (a prompt and what was generated after it, as
        vLLM keeps the blocks a request computed)."""
        self._keep(self._hashes(token_ids))

    @staticmethod
    def _hashes(token_ids: list[int]) -> list[bytes]:
        """The running hash at each full block's end, over the ids packed as 8 bytes each (a
        repr of every block made int-to-text conversions ~1% of a benchmark's fake worker)."""
        full = len(token_ids) - len(token_ids) % BLOCK_TOKENS
        data = memoryview(array("Q", token_ids[:full]).tobytes())
        digest, hashes, step = hashlib.sha256(), [], BLOCK_TOKENS * 8
        for start in range(0, len(data), step):
            digest.update(data[start:start + step])
            hashes.append(digest.copy().digest())
        return hashes

    def _keep(self, hashes: list[bytes]) -> None:
        for block in hashes:
            self._blocks[block] = None
            self._blocks.move_to_end(block)
        while len(self._blocks) > self._max:
            self._blocks.popitem(last=False)
