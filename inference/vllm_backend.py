"""The real engine: one vLLM AsyncLLM, driven from the host's loop thread."""
import logging
import time

from inference.cpu_affinity import colocate_engine_core
from inference.specs import EngineSpec
from inference.stat_logger import make_stats_logger as _make_stats_logger
from inference.types import Chunk, EngineStats, GenerationRequest

log = logging.getLogger(__name__)


class VllmBackend:
    """Wraps AsyncLLM behind the EngineBackend interface."""

    def __init__(self, spec: EngineSpec):
        self.spec = spec
        self.engine = None
        self.tokenizer = None
        self._scheduler = None
        self._prefix_queries = 0
        self._prefix_hits = 0
        self._generated_tokens = 0

    async def start(self) -> None:
        from transformers import AutoTokenizer
        from vllm.v1.engine.async_llm import AsyncLLM

        started = time.monotonic()
        log.info("engine %s: loading %s", self.spec.pool, self.spec.model)
        self.tokenizer = AutoTokenizer.from_pretrained(self.spec.model)
        self.engine = AsyncLLM.from_engine_args(self.spec.engine_args(), stat_loggers=[_make_stats_logger(self)])
        colocate_engine_core()
        log.info("engine %s: ready in %.1f s", self.spec.pool, time.monotonic() - started)

    async def stream(self, request: GenerationRequest):
        from vllm.sampling_params import RequestOutputKind, SamplingParams

        params = SamplingParams(
            n=1, max_tokens=request.max_tokens, temperature=request.temperature, top_p=request.top_p,
            seed=request.seed, stop=list(request.stop) or None, ignore_eos=request.ignore_eos,
            output_kind=RequestOutputKind.DELTA,
        )
        prompt = {"prompt_token_ids": request.prompt_token_ids}
        async for out in self.engine.generate(prompt, params, request.request_id, priority=request.priority):
            completion = out.outputs[0]
            yield Chunk(completion.text, len(completion.token_ids), out.finished,
                        completion.finish_reason if out.finished else None,
                        len(out.prompt_token_ids or ()))

    async def abort(self, request_id: str) -> None:
        await self.engine.abort(request_id)

    def stats(self) -> EngineStats:
        s = self._scheduler
        return EngineStats(
            running=s.num_running_reqs if s else 0,
            waiting=s.num_waiting_reqs if s else 0,
            kv_cache_usage=s.kv_cache_usage if s else 0.0,
            prefix_cache_queries=self._prefix_queries,
            prefix_cache_hits=self._prefix_hits,
            generated_tokens=self._generated_tokens,
        )

    async def shutdown(self) -> None:
        if self.engine is not None:
            self.engine.shutdown()
