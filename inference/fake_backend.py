"""A deterministic stand-in engine for fast platform tests (never the default).

The reply is a pure function of (prompt token ids, seed, max_tokens): a
sequence of words from a fixed vocabulary, one token per word, emitted at a
chosen pace. A prompt containing FAIL_MARKER raises mid-stream, to test the
path of an engine error.
"""
import asyncio
import hashlib
import random

from inference.types import Chunk, EngineStats, GenerationRequest

FAIL_MARKER = "[[engine-fail]]"
_WORDS = ("the", "loop", "returns", "a", "value", "when", "each", "item", "is", "read",
          "from", "list", "and", "code", "runs", "in", "order", "with", "**bold**", "`x`")


class CharTokenizer:
    """A tokenizer with a chat template for the fake engine: each token is 3 bytes
    of UTF-8 packed into one id, so token counts match the web tier's estimate
    for a model whose tokenizer it cannot read (one token per 3 bytes)."""

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False):
        text = "".join(f"<|{m['role']}|>\n{m['content']}<|end|>\n" for m in messages)
        return text + ("<|assistant|>\n" if add_generation_prompt else "")

    def encode(self, text, add_special_tokens=False):
        data = text.encode()
        return [int.from_bytes(data[i:i + 3], "big") | (len(data[i:i + 3]) << 24) for i in range(0, len(data), 3)]

    def decode(self, ids):
        """Text of ids made by encode(); ids it did not make decode to nothing."""
        return b"".join((i & 0xFFFFFF).to_bytes(i >> 24, "big") for i in ids
                        if 1 <= i >> 24 <= 3 and (i & 0xFFFFFF) < 1 << (8 * (i >> 24))).decode(errors="replace")


class FakeBackend:
    def __init__(self, *, step_seconds: float = 0.01, startup_seconds: float = 0.0):
        self.tokenizer = CharTokenizer()
        self.step_seconds = step_seconds
        self.startup_seconds = startup_seconds
        self._aborted: set[str] = set()
        self._running = 0
        self._generated = 0

    async def start(self) -> None:
        await asyncio.sleep(self.startup_seconds)

    def reply_words(self, request: GenerationRequest) -> list[str]:
        digest = hashlib.sha256(repr(request.prompt_token_ids).encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big") ^ (request.seed or 0))
        length = request.max_tokens if request.ignore_eos else min(request.max_tokens, rng.randint(12, 60))
        words = [rng.choice(_WORDS) for _ in range(length)]
        return [("" if i == 0 else " ") + w for i, w in enumerate(words)]

    async def stream(self, request: GenerationRequest):
        words = self.reply_words(request)
        fail = FAIL_MARKER in self.tokenizer.decode(request.prompt_token_ids)
        self._running += 1
        try:
            for i, word in enumerate(words):
                await asyncio.sleep(self.step_seconds)
                if request.request_id in self._aborted:
                    yield Chunk("", 0, True, "abort", len(request.prompt_token_ids))
                    return
                if fail and i == len(words) // 2:
                    raise RuntimeError("injected engine failure")
                self._generated += 1
                last = i == len(words) - 1
                reason = ("length" if len(words) == request.max_tokens else "stop") if last else None
                yield Chunk(word, 1, last, reason, len(request.prompt_token_ids))
        finally:
            self._running -= 1
            self._aborted.discard(request.request_id)

    async def abort(self, request_id: str) -> None:
        self._aborted.add(request_id)

    def stats(self) -> EngineStats:
        return EngineStats(running=self._running, generated_tokens=self._generated)

    async def shutdown(self) -> None:
        return None
