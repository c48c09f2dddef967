"""The real engine: one vLLM AsyncLLM, driven from the host's loop thread."""
import logging
import time
from collections.abc import Callable

from inference.constraint_check import ConstraintCheck
from inference.cpu_affinity import colocate_engine_core
from inference.engine_lifetime import engine_dies_with_parent
from inference.specs import EngineSpec
from inference.stat_logger import stat_loggers
from inference.stream_interval import stream_interval
from inference.types import Chunk, EngineStats, GenerationRequest, LogprobsChunk, TokenLogprob

log = logging.getLogger(__name__)


def shut_down(engine) -> None:
    """Shut an AsyncLLM down, once. Its __del__ shuts it down again when it is collected,
    and an engine still referenced (its output handler's task holds it) is collected at
    interpreter exit, when vLLM's module globals are already None: a TypeError traceback
    on every worker's exit. The instance's own `shutdown` becomes a no-op after the first."""
    engine.shutdown()
    engine.shutdown = _shut_down_already


def _shut_down_already(*_args, **_kwargs) -> None:
    return None


def sampling_params(request: GenerationRequest, interval: int = 1):
    """vLLM's SamplingParams for `request`, with DELTA outputs (the new text since the
    last output), one output per `interval` steps (the first and the last always)."""
    from vllm.sampling_params import RequestOutputKind, SamplingParams, StructuredOutputsParams

    structured = None
    if request.json_schema is not None:
        structured = StructuredOutputsParams(json=request.json_schema)
    elif request.json_object:
        structured = StructuredOutputsParams(json_object=True)
    return SamplingParams(
        n=1, max_tokens=request.max_tokens, temperature=request.temperature, top_p=request.top_p,
        top_k=request.top_k, min_p=request.min_p, frequency_penalty=request.frequency_penalty,
        presence_penalty=request.presence_penalty, repetition_penalty=request.repetition_penalty,
        seed=request.seed, stop=list(request.stop) or None, ignore_eos=request.ignore_eos,
        structured_outputs=structured, output_kind=RequestOutputKind.DELTA, logprobs=request.logprobs,
        stream_interval=interval if interval > 1 else None,
    )


# What OpenAI reports for a token too unlikely to have a figure: the floor of every
# figure here (JSON has no -Infinity), and the sampled token's if vLLM ever left it
# out of its position's dict (it always includes it).
UNKNOWN_LOGPROB = -9999.0


def _figure(logprob) -> float:
    value = float(logprob)
    return value if value > UNKNOWN_LOGPROB else UNKNOWN_LOGPROB  # also for -inf and NaN


def token_logprobs(token_ids, positions, k: int) -> tuple[TokenLogprob, ...]:
    """vLLM's per-position logprobs (a dict of token id -> Logprob holding the sampled
    token and the k of rank 1..k) as one TokenLogprob per token: the sampled token's
    own, and the top k by rank (the sampled one among them only if it ranks there)."""
    positions = list(positions or ())
    out = []
    for i, token_id in enumerate(token_ids):  # one per token, whatever vLLM sent
        position = (positions[i] if i < len(positions) else None) or {}
        sampled = position.get(token_id)
        top = sorted((lp for lp in position.values() if lp.rank is not None and lp.rank <= k),
                     key=lambda lp: (lp.rank, -lp.logprob))
        out.append(TokenLogprob(
            (sampled.decoded_token or "") if sampled else "",
            _figure(sampled.logprob) if sampled else UNKNOWN_LOGPROB,
            tuple((lp.decoded_token or "", _figure(lp.logprob)) for lp in top)))
    return tuple(out)


class VllmBackend:
    """Wraps AsyncLLM behind the EngineBackend interface."""

    def __init__(self, spec: EngineSpec, colocate_engine_core: bool = True,
                 output_window: float | Callable[[], float] = 0.0):
        self.spec = spec
        self.colocate = colocate_engine_core
        self.output_window = output_window  # seconds between two outputs of a request, about
        self._step_seconds = self._last_step_at = 0.0  # kept by the stat logger
        self.engine = None
        self.tokenizer = None
        self._scheduler = None
        self._prefix_queries = 0
        self._prefix_hits = 0
        self._generated_tokens = 0
        self._constraints: ConstraintCheck | None = None

    async def start(self) -> None:
        from transformers import AutoTokenizer
        from vllm.v1.engine.async_llm import AsyncLLM

        started = time.monotonic()
        log.info("engine %s: loading %s", self.spec.pool, self.spec.model)
        self.tokenizer = AutoTokenizer.from_pretrained(self.spec.model)
        engine_dies_with_parent()  # however this process dies, its engine does not stay behind
        self.engine = AsyncLLM.from_engine_args(self.spec.engine_args(), stat_loggers=stat_loggers(self))
        colocate_engine_core(enabled=self.colocate)
        # vLLM reads its settings from the environment on every access (in the front end,
        # for every request at every engine step); its engine core caches them once
        # started, and nothing in a worker changes them after the engine is up.
        from vllm import envs

        envs.enable_envs_cache()
        log.info("engine %s: ready in %.1f s", self.spec.pool, time.monotonic() - started)

    async def add(self, request: GenerationRequest, emit) -> None:
        """Submit to AsyncLLM without a consuming task: its output handler calls the
        request's collector once per output (DELTA outputs, one per `stream_interval`
        steps at the engine's latest step time), and the collector's `put` is replaced by
        one that hands the output straight to `emit`."""
        window = self.output_window() if callable(self.output_window) else self.output_window
        params = sampling_params(request, stream_interval(window, self._step_seconds))
        prompt_len = len(request.prompt_token_ids)
        k = request.logprobs

        def put(output) -> None:
            if isinstance(output, Exception):
                emit(Chunk("", 0, True, error=f"{type(output).__name__}: {output}"))
                return
            completion = output.outputs[0]
            reason = completion.finish_reason if output.finished else None
            if reason == "error":  # vLLM failed the request (a grammar that did not compile, a KV load): no reply
                emit(Chunk("", 0, True, error="the engine failed the request (finish_reason error)"))
                return
            if k is None:
                emit(Chunk(completion.text, len(completion.token_ids), output.finished, reason, prompt_len))
            else:
                emit(LogprobsChunk(completion.text, len(completion.token_ids), output.finished, reason, prompt_len,
                                   logprobs=token_logprobs(completion.token_ids, completion.logprobs, k)))

        collector = await self.engine.add_request(request.request_id, {"prompt_token_ids": request.prompt_token_ids},
                                                  params, priority=request.priority)
        collector.put = put
        early, collector.output = collector.output, None  # what arrived before `put` was ours
        if early is not None:
            put(early)

    async def abort(self, request_id: str) -> None:
        await self.engine.abort(request_id)

    def constraint_problem(self, json_schema: str, *, budget_seconds: float) -> str | None:
        if self._constraints is None:
            self._constraints = ConstraintCheck(self.tokenizer, self.engine.model_config.get_vocab_size())
        return self._constraints.problem(json_schema, budget_seconds=budget_seconds)

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
            shut_down(self.engine)
