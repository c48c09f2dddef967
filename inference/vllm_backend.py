"""The real engine: one vLLM AsyncLLM, driven from the host's loop thread."""
import json
import logging
import time
from collections.abc import Callable

from inference.carried_grammar import SCHEDULER, carried_extra_args
from inference.constraint_check import ConstraintCheck
from inference.cpu_affinity import colocate_engine_core
from inference.engine_lifetime import engine_dies_with_parent
from inference.specs import EngineSpec
from inference.stat_logger import EngineCounters, stat_loggers
from inference.stream_interval import stream_interval
from inference.types import (Chunk, DetailChunk, EngineStats, GenerationRequest, PromptLogprob, RequestRefused,
                             TokenLogprob)

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
    elif request.guide is not None:
        kind, spec = request.guide
        structured = StructuredOutputsParams(**{kind: json.loads(spec) if kind == "choice" else spec})
    return SamplingParams(
        n=1, max_tokens=request.max_tokens, temperature=request.temperature, top_p=request.top_p,
        top_k=request.top_k, min_p=request.min_p, frequency_penalty=request.frequency_penalty,
        presence_penalty=request.presence_penalty, repetition_penalty=request.repetition_penalty,
        seed=_seed(request.seed), stop=list(request.stop) or None, ignore_eos=request.ignore_eos,
        structured_outputs=structured, output_kind=RequestOutputKind.DELTA, logprobs=request.logprobs,
        stream_interval=interval if interval > 1 else None, min_tokens=request.min_tokens,
        logit_bias=dict(request.logit_bias) or None,
        allowed_token_ids=list(request.allowed_token_ids) if request.allowed_token_ids is not None else None,
        prompt_logprobs=request.prompt_logprobs,
        extra_args=carried_extra_args(request.carried_ids) if request.constrained else None,
    )


def _seed(seed: int | None) -> int | None:
    """Any 64-bit seed, as vLLM's generator takes it: a negative one as its unsigned
    64-bit twin (vLLM reads -1 as no seed at all, and would draw a random reply)."""
    return None if seed is None else seed % 2**64


# What OpenAI reports for a token too unlikely to have a figure: the floor of every
# figure here (JSON has no -Infinity), and the sampled token's if vLLM ever left it
# out of its position's dict (it always includes it).
UNKNOWN_LOGPROB = -9999.0


def _figure(logprob) -> float:
    value = float(logprob)
    return value if value > UNKNOWN_LOGPROB else UNKNOWN_LOGPROB  # also for -inf and NaN


def token_logprobs(token_ids, positions, k: int, *, as_ids: bool = False) -> tuple[TokenLogprob, ...]:
    """vLLM's per-position logprobs (a dict of token id -> Logprob holding the sampled
    token and the k of rank 1..k) as one TokenLogprob per token: the sampled token's
    own, and the top k by rank (the sampled one among them only if it ranks there).
    `as_ids`: tokens are named "token_id:N" (vLLM's return_tokens_as_token_ids)."""
    positions = list(positions or ())
    out = []
    for i, token_id in enumerate(token_ids):  # one per token, whatever vLLM sent
        position = (positions[i] if i < len(positions) else None) or {}
        sampled = position.get(token_id)
        top = sorted(((t, lp) for t, lp in position.items() if lp.rank is not None and lp.rank <= k),
                     key=lambda item: (item[1].rank, -item[1].logprob))
        if as_ids:
            name = f"token_id:{token_id}"
            alternatives = tuple((f"token_id:{t}", _figure(lp.logprob)) for t, lp in top)
        else:
            name = (sampled.decoded_token or "") if sampled else ""
            alternatives = tuple((lp.decoded_token or "", _figure(lp.logprob)) for _, lp in top)
        out.append(TokenLogprob(name, _figure(sampled.logprob) if sampled else UNKNOWN_LOGPROB, alternatives))
    return tuple(out)


def prompt_token_logprobs(token_ids, positions, k: int) -> tuple:
    """A prompt's log probabilities (vLLM's prompt_logprobs: None for the first token,
    then a dict of token id -> Logprob per token, holding it and the k of rank 1..k) as
    None and one PromptLogprob per later token."""
    positions = list(positions or ())
    out: list = [None] if token_ids else []
    for i in range(1, len(token_ids)):
        position = (positions[i] if i < len(positions) else None) or {}
        token_id, own = token_ids[i], position.get(token_ids[i])
        top = sorted(((t, lp) for t, lp in position.items() if lp.rank is not None and lp.rank <= k),
                     key=lambda item: (item[1].rank, -item[1].logprob))
        out.append(PromptLogprob(token_id, (own.decoded_token or "") if own else "",
                                 _figure(own.logprob) if own else UNKNOWN_LOGPROB, own.rank if own else None,
                                 tuple((t, lp.decoded_token or "", _figure(lp.logprob)) for t, lp in top)))
    return tuple(out)


def _details(request: GenerationRequest, output, completion) -> dict:
    """A detailed chunk's fields for one vLLM output: what the request asked for."""
    as_ids = request.tokens_as_ids
    out = {"token_ids": tuple(completion.token_ids) if request.token_ids else ()}
    if request.logprobs is not None:
        out["logprobs"] = token_logprobs(completion.token_ids, completion.logprobs, request.logprobs, as_ids=as_ids)
    if request.prompt_logprobs is not None and output.prompt_logprobs:  # the first output only
        out["prompt_logprobs"] = prompt_token_logprobs(output.prompt_token_ids, output.prompt_logprobs,
                                                       request.prompt_logprobs)
    return out


class VllmBackend:
    """Wraps AsyncLLM behind the EngineBackend interface."""

    def __init__(self, spec: EngineSpec, colocate_engine_core: bool = True,
                 output_window: float | Callable[[], float] = 0.0):
        self.spec = spec
        self.colocate = colocate_engine_core
        self.output_window = output_window  # seconds between two outputs of a request, about
        self.counters = EngineCounters()  # kept by the stat logger
        self.engine = None
        self.tokenizer = None
        self._constraints: ConstraintCheck | None = None

    async def start(self) -> None:
        from transformers import AutoTokenizer
        from vllm.v1.engine.async_llm import AsyncLLM

        started = time.monotonic()
        log.info("engine %s: loading %s", self.spec.pool, self.spec.model)
        self.tokenizer = AutoTokenizer.from_pretrained(self.spec.model)
        engine_dies_with_parent()  # however this process dies, its engine does not stay behind
        args = self.spec.engine_args()
        args.scheduler_cls = SCHEDULER  # a constrained reply carried on keeps its grammar (inference.carried_grammar)
        self.engine = AsyncLLM.from_engine_args(args, stat_loggers=stat_loggers(self.counters))
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
        from vllm.exceptions import VLLMClientError

        window = self.output_window() if callable(self.output_window) else self.output_window
        try:
            params = sampling_params(request, stream_interval(window, self.counters.step_seconds))
        except (VLLMClientError, ValueError, TypeError) as exc:
            raise RequestRefused(str(exc)) from exc
        prompt_len = len(request.prompt_token_ids)
        detailed = request.detailed
        generated: list[int] = []  # every id so far (DELTA outputs carry the new ones): the reply's record

        def put(output) -> None:
            if isinstance(output, Exception):
                emit(Chunk("", 0, True, error=f"{type(output).__name__}: {output}"))
                return
            completion = output.outputs[0]
            finished = output.finished
            reason = completion.finish_reason if finished else None
            if reason == "error":  # vLLM failed the request (a grammar that did not compile, a KV load): no reply
                emit(Chunk("", 0, True, error="the engine failed the request (finish_reason error)"))
                return
            cached = (output.num_cached_tokens or 0) if finished else 0
            generated.extend(completion.token_ids)
            ids = tuple(generated) if finished and reason in ("stop", "length", "abort") else ()
            if not detailed:
                emit(Chunk(completion.text, len(completion.token_ids), finished, reason, prompt_len, None, cached,
                           ids))
            else:
                emit(DetailChunk(completion.text, len(completion.token_ids), finished, reason, prompt_len, None,
                                 cached, ids, **_details(request, output, completion)))

        try:
            collector = await self.engine.add_request(request.request_id,
                                                      {"prompt_token_ids": request.prompt_token_ids}, params,
                                                      priority=request.priority)
        except (VLLMClientError, ValueError, TypeError) as exc:  # its checks of the request (vocabulary, grammar)
            raise RequestRefused(str(exc)) from exc
        collector.put = put
        early, collector.output = collector.output, None  # what arrived before `put` was ours
        if early is not None:
            put(early)

    async def abort(self, request_id: str) -> None:
        await self.engine.abort(request_id)

    def constraint_problem(self, json_schema: str, *, budget_seconds: float) -> str | None:
        if self._constraints is None:
            config = self.engine.vllm_config.structured_outputs_config
            self._constraints = ConstraintCheck(self.tokenizer, self.engine.model_config.get_vocab_size(),
                                                backend=config.backend,
                                                any_whitespace=not config.disable_any_whitespace)
        return self._constraints.problem(json_schema, budget_seconds=budget_seconds)

    def stats(self) -> EngineStats:
        s, counters = self.counters.scheduler, self.counters
        return EngineStats(
            running=s.num_running_reqs if s else 0,
            waiting=s.num_waiting_reqs if s else 0,
            kv_cache_usage=s.kv_cache_usage if s else 0.0,
            prefix_cache_queries=counters.prefix_queries,
            prefix_cache_hits=counters.prefix_hits,
            generated_tokens=counters.generated_tokens,
        )

    async def shutdown(self) -> None:
        if self.engine is not None:
            shut_down(self.engine)
