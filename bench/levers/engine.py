"""Shared pieces of the lever benchmarks: an engine built exactly as a worker builds
it (the demo pool's pinned arguments plus one lever), token-timed streams, and the
engine's own counters (speculative acceptance, KV capacity)."""
import asyncio
import dataclasses
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from inference.stat_logger import EngineCounters, stat_loggers

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "out"
MODELS = ROOT / "var" / "models"
CONTEXT_LENGTH = 1024
KV_CACHE_BYTES = 2**30  # the same KV memory for every arm unless a bench sets its own


def spec(model: str = "flagship", **overrides):
    """The tiny demo model's spec with one lever (no Django: the arguments live in inference.engine_config)."""
    from inference.engine_config import TINY_ENGINE_ARGS
    from inference.specs import EngineSpec

    return EngineSpec.build(pool=model, model=str(MODELS / model), context_length=CONTEXT_LENGTH,
                            engine_args={**TINY_ENGINE_ARGS, **overrides})


def draft_config(k: int = 4) -> dict:
    return {"method": "draft_model", "model": str(MODELS / "small"), "num_speculative_tokens": k}


def ngram_config(k: int = 4) -> dict:
    return {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": 2, "prompt_lookup_max": 4}


class Counters(EngineCounters):
    """The shared stat logger's sums, with speculative decoding's acceptance."""

    @property
    def acceptance(self) -> float | None:
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else None


class Engine:
    """One AsyncLLM for one arm; `async with Engine(spec) as e:`.

    KV memory is set in bytes (vLLM's kv_cache_memory_bytes, which a pool does not
    pin: on a GPU gpu_memory_utilization sizes it) so a bench can model a small GPU."""

    def __init__(self, engine_spec, *, kv_cache_bytes: int = KV_CACHE_BYTES):
        os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)  # it would override the byte figure
        self.spec = dataclasses.replace(engine_spec, args={**engine_spec.args, "kv_cache_memory_bytes": kv_cache_bytes})
        self.counters = Counters()
        self.engine = None
        self.start_seconds = 0.0

    async def __aenter__(self):
        from transformers import AutoTokenizer
        from vllm.v1.engine.async_llm import AsyncLLM

        self.tokenizer = AutoTokenizer.from_pretrained(self.spec.model)
        started = time.monotonic()
        self.engine = AsyncLLM.from_engine_args(self.spec.engine_args(), stat_loggers=stat_loggers(self.counters))
        self.start_seconds = time.monotonic() - started
        return self

    async def __aexit__(self, *exc):
        self.engine.shutdown()

    @property
    def kv_tokens(self) -> int:
        """KV capacity in tokens, as the engine sized it (blocks x block size)."""
        cache = self.engine.vllm_config.cache_config
        return cache.num_gpu_blocks * cache.block_size

    def chat_ids(self, messages: list[dict]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)

    async def stream(self, ids: list[int], request_id: str, *, max_tokens: int, ignore_eos: bool = False,
                     delay: float = 0.0) -> "Stream":
        """Greedy generation; the arrival time of every token."""
        from vllm.sampling_params import RequestOutputKind, SamplingParams

        await asyncio.sleep(delay)
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=ignore_eos, seed=0,
                                output_kind=RequestOutputKind.DELTA)
        s = Stream(sent=time.monotonic())
        async for out in self.engine.generate({"prompt_token_ids": ids}, params, request_id):
            now = time.monotonic()
            s.times += [now] * len(out.outputs[0].token_ids)
            s.text += out.outputs[0].text
        return s


@dataclass
class Stream:
    sent: float
    times: list[float] = field(default_factory=list)
    text: str = ""

    @property
    def gaps(self) -> list[float]:
        """Inter-token gaps (tokens that arrive in one step count as one gap of the step, the rest 0)."""
        return [b - a for a, b in zip(self.times, self.times[1:])]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def mean(values) -> float:
    values = list(values)
    return statistics.fmean(values) if values else float("nan")
