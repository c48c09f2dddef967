"""The small vocabulary shared by the engine host, its backends and its sink."""
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

# The most alternatives a request may ask for per token (OpenAI's top_logprobs limit,
# and vLLM's default max_logprobs).
MAX_TOP_LOGPROBS = 20


# The sampling a request gets for a knob nobody set: vLLM's and OpenAI's defaults, the one
# home of these figures (GenerationRequest's fields, the web's validation, the worker's
# engine request); a pool's `default_sampling` overrides them for its runs.
SAMPLING_DEFAULTS = MappingProxyType({
    "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
    "frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0,
})


class RequestRefused(ValueError):
    """The engine refuses the request itself (a grammar or regex it cannot compile, a
    token id outside its vocabulary): the client's mistake, not the engine's failure."""


# How a refused request's error text begins, so the sink can tell it from an engine failure.
REFUSED_PREFIX = "request refused: "


class TokenLogprob(NamedTuple):
    """One generated token's log probability and the `top` most likely tokens at its
    position, most likely first, as (token text, logprob) pairs. A tuple, so it goes
    to JSON as [token, logprob, [[alt, logprob], ...]] with no conversion."""

    token: str
    logprob: float
    top: tuple = ()


class PromptLogprob(NamedTuple):
    """One prompt token's log probability (vLLM's prompt_logprobs): its id and text, its
    rank among the vocabulary, and the `top` most likely tokens at its position as
    (id, text, logprob), most likely first. A tuple, so it goes to JSON with no conversion."""

    token_id: int
    token: str
    logprob: float
    rank: int | None
    top: tuple = ()


@dataclass(frozen=True)
class GenerationRequest:
    """One generation: a prompt (token ids) and the sampling it runs with."""

    request_id: str
    prompt_token_ids: list[int]
    max_tokens: int
    temperature: float = SAMPLING_DEFAULTS["temperature"]
    top_p: float = SAMPLING_DEFAULTS["top_p"]
    seed: int | None = None
    stop: tuple[str, ...] = ()
    priority: int = 0  # lower is served first (vLLM's priority scheduling)
    ignore_eos: bool = False
    top_k: int = SAMPLING_DEFAULTS["top_k"]  # 0: off
    min_p: float = SAMPLING_DEFAULTS["min_p"]
    frequency_penalty: float = SAMPLING_DEFAULTS["frequency_penalty"]
    presence_penalty: float = SAMPLING_DEFAULTS["presence_penalty"]
    repetition_penalty: float = SAMPLING_DEFAULTS["repetition_penalty"]
    # The reply is constrained to JSON: any object (json_object), or one matching the
    # JSON Schema `json_schema` (as JSON text, so the request stays hashable).
    json_object: bool = False
    json_schema: str | None = None
    # None: no log probabilities; k (0..MAX_TOP_LOGPROBS): every token's logprob and the
    # k most likely alternatives at its position.
    logprobs: int | None = None
    # vLLM's own knobs. `guide`: another structured-output constraint than JSON, as
    # (kind, spec): ("regex", pattern), ("choice", JSON list), ("grammar", EBNF), or
    # ("structural_tag", JSON). `logit_bias`: (token id, bias) pairs.
    min_tokens: int = 0
    logit_bias: tuple[tuple[int, float], ...] = ()
    allowed_token_ids: tuple[int, ...] | None = None
    guide: tuple[str, str] | None = None
    # A constrained reply carried on from earlier attempts: the token ids of the text they
    # wrote (at the prompt's end), which the grammar reads before its first token here
    # (inference.carried_grammar). Empty: the grammar starts at this request's first token.
    carried_ids: tuple[int, ...] = ()
    # Per-token details beyond the text, asked for by few runs: the prompt's log
    # probabilities (k alternatives, as `logprobs`), each generated token's id, and
    # generated tokens named "token_id:N" in log probabilities rather than by their text.
    prompt_logprobs: int | None = None
    token_ids: bool = False
    tokens_as_ids: bool = False

    @property
    def detailed(self) -> bool:
        """Whether its outputs carry more than text (DetailChunk rather than Chunk)."""
        return self.logprobs is not None or self.prompt_logprobs is not None or self.token_ids

    @property
    def constrained(self) -> bool:
        """Whether a grammar constrains the reply (JSON, a guide): its carried_ids then feed it."""
        return self.json_schema is not None or self.json_object or self.guide is not None


@dataclass(frozen=True, slots=True)
class Chunk:
    """What a backend emits for one request at one engine step. `error` is set (and
    `finished` true) when the engine failed the request. `num_cached_tokens`, on the
    last chunk: the prompt tokens the engine's prefix cache served."""

    text: str
    num_tokens: int
    finished: bool = False
    finish_reason: str | None = None  # stop, length, abort
    num_prompt_tokens: int = 0
    error: str | None = None
    num_cached_tokens: int = 0
    # On the last chunk of a request that finished (stop, length, abort): every id it generated,
    # so the reply's record keeps the ids the model produced (inference.token_prefix).
    output_token_ids: tuple[int, ...] = ()
    logprobs = None  # not a field: only a DetailChunk has them, so a plain chunk costs what it did


@dataclass(frozen=True, slots=True)
class DetailChunk(Chunk):
    """A chunk of a request that asked for details (GenerationRequest.detailed): one
    TokenLogprob per token (None when not asked for), the tokens' ids (empty when not
    asked for), and in the request's first chunk its prompt's log probabilities (one
    PromptLogprob per prompt token, None for the first, which has no context), if asked for."""

    logprobs: tuple[TokenLogprob, ...] | None = None
    token_ids: tuple[int, ...] = ()
    prompt_logprobs: tuple[PromptLogprob | None, ...] | None = None



@dataclass(frozen=True, slots=True)
class StepDelta:
    """One request's new output in one engine step, as handed to the sink.

    `error` is set (and `finished` true) when the request failed in the engine."""

    request_id: str
    text: str
    num_tokens: int
    finished: bool = False
    finish_reason: str | None = None
    num_prompt_tokens: int = 0
    error: str | None = None
    num_cached_tokens: int = 0
    output_token_ids: tuple[int, ...] = ()  # as on Chunk: the last delta's, every id generated
    # Not fields, as on Chunk: the engine loop makes one delta per token of every run,
    # and only a DetailStepDelta (a run that asked) pays for carrying details.
    logprobs = None
    token_ids = ()
    prompt_logprobs = None


@dataclass(frozen=True, slots=True)
class DetailStepDelta(StepDelta):
    """A step delta of a request that asked for details, as DetailChunk carries them."""

    logprobs: tuple[TokenLogprob, ...] | None = None
    token_ids: tuple[int, ...] = ()
    prompt_logprobs: tuple[PromptLogprob | None, ...] | None = None



@dataclass
class EngineStats:
    """The figures a worker heartbeat publishes about its engine."""

    ready: bool = False
    running: int = 0
    waiting: int = 0
    kv_cache_usage: float = 0.0
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    generated_tokens: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def prefix_cache_hit_rate(self) -> float:
        return self.prefix_cache_hits / self.prefix_cache_queries if self.prefix_cache_queries else 0.0
