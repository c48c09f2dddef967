"""Validation of what a client asks a run to do; each failure names the problem."""
import json
import math
import re
import secrets
from dataclasses import dataclass, field

from django.conf import settings
from jsonschema import Draft202012Validator, SchemaError

from chatsite.errors import InvalidInput
from chatsite.runs.schema_limits import check_schema_cost
from chatsite.text import clean_text, has_surrogates
from chatsite.pools.tokens import vocab_size
from inference.types import MAX_TOP_LOGPROBS

MAX_STOP_SEQUENCES = 4
MAX_STOP_CHARS = 64
MIN_SEED, MAX_SEED = -2**63, 2**63 - 1  # any 64-bit integer, as OpenAI and vLLM take
MAX_TOP_K = 2**31 - 1
MAX_REPETITION_PENALTY = 10.0
MAX_SCHEMA_CHARS = 32_000


@dataclass(frozen=True)
class Sampling:
    max_tokens: int
    temperature: float
    top_p: float
    stop: tuple[str, ...]
    seed: int
    ignore_eos: bool = False
    top_k: int = 0  # 0: off
    min_p: float = 0.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    # None, {"type": "json_object"} or {"type": "json_schema", "schema": {...}}: the reply is
    # constrained to JSON (vLLM structured outputs).
    response_format: dict | None = None
    # None, or k: every token's log probability and the k most likely alternatives (0..20).
    logprobs: int | None = None
    # vLLM's own request knobs and a /v1 call's prompt options (chatsite.runs.vllm_knobs),
    # kept on the run only when they are not the default.
    vllm: dict = field(default_factory=dict)

    def as_run_sampling(self) -> dict:
        """What GenerationRun.sampling holds (max_tokens and seed have columns of their own);
        `logprobs` and vLLM's knobs only when asked for."""
        out = {"temperature": self.temperature, "top_p": self.top_p, "stop": list(self.stop),
               "ignore_eos": self.ignore_eos, "top_k": self.top_k, "min_p": self.min_p,
               "frequency_penalty": self.frequency_penalty, "presence_penalty": self.presence_penalty,
               "repetition_penalty": self.repetition_penalty, "response_format": self.response_format}
        if self.logprobs is not None:
            out["logprobs"] = self.logprobs
        out.update((name, value) for name, value in self.vllm.items() if value != VLLM_DEFAULTS[name])
        return out


def _number(value, *, field: str, lo: float, hi: float, lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{field} must be a number", field=field)
    value = float(value)
    if not math.isfinite(value) or value > hi or value < lo or (lo_open and value == lo):
        bound = f"greater than {lo}" if lo_open else f"at least {lo}"
        raise InvalidInput(f"{field} must be {bound} and at most {hi}", field=field)
    return value


def clean_sampling(pool, *, max_tokens=None, temperature=None, top_p=None, stop=None, seed=None,
                   ignore_eos=None, top_k=None, min_p=None, frequency_penalty=None, presence_penalty=None,
                   repetition_penalty=None, response_format=None, logprobs=None, **vllm) -> Sampling:
    """The run's sampling, from the client's values over the pool's defaults (None:
    the pool's `default_sampling`, else the engine's default), so a pool's default
    penalty reaches every surface, whether or not its wire format can name it; `vllm`:
    vLLM's own knobs (VLLM_DEFAULTS' names). Raises InvalidInput naming the parameter at fault."""
    defaults = pool.default_sampling or {}
    if max_tokens is None:
        max_tokens = min(defaults.get("max_tokens", settings.CHATSITE["DEFAULT_MAX_TOKENS"]), pool.max_output_tokens)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise InvalidInput("max_tokens must be an integer", field="max_tokens")
    if not 1 <= max_tokens <= pool.max_output_tokens:
        raise InvalidInput(f"max_tokens must be between 1 and {pool.max_output_tokens} for model {pool.name!r}",
                           field="max_tokens")
    temperature = _number(defaults.get("temperature", 0.7) if temperature is None else temperature,
                          field="temperature", lo=0.0, hi=2.0)
    top_p = _number(defaults.get("top_p", 1.0) if top_p is None else top_p, field="top_p", lo=0.0, hi=1.0, lo_open=True)
    if stop is None:
        stop = []
    if isinstance(stop, str):
        stop = [stop]
    if (not isinstance(stop, list) or len(stop) > MAX_STOP_SEQUENCES
            or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS and "\x00" not in s
                       and not has_surrogates(s) for s in stop)):
        raise InvalidInput(f"stop must be a string or a list of at most {MAX_STOP_SEQUENCES} non-empty strings "
                           f"of at most {MAX_STOP_CHARS} characters", field="stop")
    if seed is None:
        seed = secrets.randbelow(2**31)
    if isinstance(seed, bool) or not isinstance(seed, int) or not MIN_SEED <= seed <= MAX_SEED:
        raise InvalidInput(f"seed must be an integer between {MIN_SEED} and {MAX_SEED}", field="seed")
    if ignore_eos is not None and not isinstance(ignore_eos, bool):
        raise InvalidInput("ignore_eos must be true or false", field="ignore_eos")
    penalties = {"top_k": top_k, "min_p": min_p, "frequency_penalty": frequency_penalty,
                 "presence_penalty": presence_penalty, "repetition_penalty": repetition_penalty}
    return Sampling(max_tokens, temperature, top_p, tuple(stop), seed, bool(ignore_eos),
                    **_clean_penalties(**{name: defaults.get(name) if value is None else value
                                          for name, value in penalties.items()}),
                    response_format=clean_response_format(response_format), logprobs=clean_logprobs(logprobs),
                    vllm=clean_vllm_knobs(pool, max_tokens=max_tokens, **vllm))


def clean_logprobs(value, *, field: str = "top_logprobs", most: int = MAX_TOP_LOGPROBS) -> int | None:
    """None (no log probabilities) or how many alternatives per token, 0..`most`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise InvalidInput(f"{field} must be an integer between 0 and {most}", field=field)
    return value


def _clean_penalties(*, top_k, min_p, frequency_penalty, presence_penalty, repetition_penalty) -> dict:
    """vLLM's ranges: top_k 0 (off) or at least 1 (-1 is taken as off, as vLLM does),
    min_p 0..1, frequency and presence penalties -2..2, repetition penalty above 0."""
    if top_k is None or top_k == -1:
        top_k = 0
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 0 <= top_k <= MAX_TOP_K:
        raise InvalidInput(f"top_k must be an integer: 0 (off) or between 1 and {MAX_TOP_K}", field="top_k")
    return {
        "top_k": top_k,
        "min_p": 0.0 if min_p is None else _number(min_p, field="min_p", lo=0.0, hi=1.0),
        "frequency_penalty": 0.0 if frequency_penalty is None else _number(
            frequency_penalty, field="frequency_penalty", lo=-2.0, hi=2.0),
        "presence_penalty": 0.0 if presence_penalty is None else _number(
            presence_penalty, field="presence_penalty", lo=-2.0, hi=2.0),
        "repetition_penalty": 1.0 if repetition_penalty is None else _number(
            repetition_penalty, field="repetition_penalty", lo=0.0, hi=MAX_REPETITION_PENALTY, lo_open=True),
    }


def clean_response_format(value) -> dict | None:
    """OpenAI's response_format, reduced to what a run keeps: None (text),
    {"type": "json_object"}, or {"type": "json_schema", "name", "schema"} from
    {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}. `strict` may be
    true or false: the schema is enforced either way. Raises InvalidInput naming the part."""
    if value is None or value == {"type": "text"}:
        return None
    if value == {"type": "json_object"}:
        return {"type": "json_object"}
    if not isinstance(value, dict) or value.get("type") != "json_schema":
        raise InvalidInput('response_format must be {"type": "text"}, {"type": "json_object"} or {"type": '
                           '"json_schema", "json_schema": {"name": ..., "schema": {...}}}', field="response_format")
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        raise InvalidInput("response_format.json_schema must be an object with name and schema",
                           field="response_format.json_schema")
    name, schema = spec.get("name"), spec.get("schema")
    clean_text(name, field="response_format.json_schema.name", max_chars=64)
    if not isinstance(schema, dict):
        raise InvalidInput("response_format.json_schema.schema must be a JSON Schema object",
                           field="response_format.json_schema.schema")
    check_json_schema(schema, field="response_format.json_schema.schema")
    if spec.get("strict") not in (None, True, False):
        raise InvalidInput("response_format.json_schema.strict must be true or false",
                           field="response_format.json_schema.strict")
    return {"type": "json_schema", "name": name, "schema": schema}


def check_json_schema(schema: dict, *, field: str, max_chars: int = MAX_SCHEMA_CHARS) -> None:
    """`schema` is a JSON Schema the engine may constrain a reply to: within the cost
    limits (schema_limits, checked first: nothing here recurses before them), at most
    `max_chars` as JSON, and valid. Raises InvalidInput naming `field` or its part."""
    check_schema_cost(schema, field=field)
    if len(json.dumps(schema)) > max_chars:
        raise InvalidInput(f"{field} may be at most {max_chars} characters as JSON", field=field)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise InvalidInput(f"{field} is not a valid JSON Schema: {exc.message}", field=field) from None


# vLLM's knobs and a /v1 call's prompt options a run may carry in its sampling, and their
# defaults (absent from the run's sampling: the default).
VLLM_DEFAULTS = {"min_tokens": 0, "logit_bias": None, "allowed_token_ids": None, "guide": None,
                 "prompt_logprobs": None, "return_token_ids": False, "return_tokens_as_token_ids": False,
                 "prompt_token_ids": None, "echo": False, "add_generation_prompt": None,
                 "continuous_usage_stats": False}
GUIDES = ("regex", "choice", "grammar", "structural_tag")
MAX_LOGIT_BIAS = 1024  # tokens biased in one request
MAX_ALLOWED_TOKEN_IDS = 65_536
MAX_CHOICE_STRINGS = 256
MAX_TOKEN_ID = 2**31 - 1


def clean_vllm_knobs(pool, *, max_tokens: int, min_tokens=None, logit_bias=None, allowed_token_ids=None, guide=None,
                     prompt_logprobs=None, prompt_token_ids=None, add_generation_prompt=None, **flags) -> dict:
    """vLLM's own knobs and a /v1 call's prompt options (VLLM_DEFAULTS), checked as
    vLLM's server checks them: token ids against the pool's vocabulary when its
    tokenizer is on local disk (else the engine refuses one out of range, and the run
    ends with a client error). None: the default."""
    vocab = vocab_size(pool.model)
    if min_tokens is not None and (isinstance(min_tokens, bool) or not isinstance(min_tokens, int)
                                   or not 0 <= min_tokens <= max_tokens):
        raise InvalidInput(f"min_tokens must be an integer from 0 to max_tokens ({max_tokens})", field="min_tokens")
    for name in ("return_token_ids", "return_tokens_as_token_ids", "echo", "continuous_usage_stats"):
        if flags.get(name) is not None and not isinstance(flags[name], bool):
            raise InvalidInput(f"{name} must be true or false", field=name)
    if add_generation_prompt is not None and not isinstance(add_generation_prompt, bool):
        raise InvalidInput("add_generation_prompt must be true or false", field="add_generation_prompt")
    return {"min_tokens": min_tokens or 0, "logit_bias": _logit_bias(logit_bias, vocab),
            "allowed_token_ids": _token_ids(allowed_token_ids, "allowed_token_ids", vocab, MAX_ALLOWED_TOKEN_IDS),
            "guide": _guide(guide), "prompt_logprobs": clean_logprobs(prompt_logprobs, field="prompt_logprobs"),
            "prompt_token_ids": _token_ids(prompt_token_ids, "prompt", vocab, pool.context_length),
            "add_generation_prompt": add_generation_prompt,
            **{name: bool(flags.get(name)) for name in ("return_token_ids", "return_tokens_as_token_ids", "echo",
                                                        "continuous_usage_stats")}}


def clean_token_id(value, *, field: str, vocab: int | None) -> int:
    """A token id: an integer from 0, below the vocabulary's size when it is known."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKEN_ID or (
            vocab is not None and value >= vocab):
        bound = f"below the model's vocabulary of {vocab}" if vocab is not None else f"at most {MAX_TOKEN_ID}"
        raise InvalidInput(f"{field} must hold token ids: integers from 0, {bound}", field=field)
    return value


def _logit_bias(value, vocab: int | None) -> dict | None:
    """OpenAI's logit_bias: {token id as a string: bias from -100 to 100}."""
    if value is None or value == {}:
        return None
    if not isinstance(value, dict) or len(value) > MAX_LOGIT_BIAS:
        raise InvalidInput(f"logit_bias must be an object of at most {MAX_LOGIT_BIAS} token ids (as strings) to "
                           "biases", field="logit_bias")
    out = {}
    for key, bias in value.items():
        token = int(key) if isinstance(key, str) and key.isascii() and key.isdigit() and len(key) <= 10 else None
        if token is None:
            raise InvalidInput(f"logit_bias: {key[:20]!r} is not a token id (an integer, as a string)",
                               field="logit_bias")
        clean_token_id(token, field="logit_bias", vocab=vocab)
        out[str(token)] = _number(bias, field="logit_bias", lo=-100.0, hi=100.0)
    return out


def _token_ids(value, field: str, vocab: int | None, most: int) -> list | None:
    if value is None:
        return None
    if not isinstance(value, list) or not 0 < len(value) <= most:
        raise InvalidInput(f"{field} must be a list of 1 to {most} token ids", field=field)
    return [clean_token_id(v, field=field, vocab=vocab) for v in value]


def _guide(value) -> list | None:
    """[kind, spec]: a regex, a list of choices, a grammar (text), or a structural tag (JSON
    text); the engine compiles it (and refuses one it cannot: a client error)."""
    if value is None:
        return None
    kind, spec = value
    field = f"structured_outputs.{kind}"
    if kind not in GUIDES:
        raise InvalidInput(f"structured_outputs: one of {', '.join(GUIDES)} or json", field="structured_outputs")
    if kind == "choice":
        if (not isinstance(spec, list) or not 0 < len(spec) <= MAX_CHOICE_STRINGS
                or not all(isinstance(c, str) and c and not has_surrogates(c) for c in spec)
                or len(json.dumps(spec)) > MAX_SCHEMA_CHARS):
            raise InvalidInput(f"{field} must be a list of 1 to {MAX_CHOICE_STRINGS} non-empty strings", field=field)
        return [kind, json.dumps(spec)]
    if kind == "structural_tag" and isinstance(spec, dict):
        spec = json.dumps(spec)
    if (not isinstance(spec, str) or not spec.strip() or len(spec) > MAX_SCHEMA_CHARS or "\x00" in spec
            or has_surrogates(spec)):
        raise InvalidInput(f"{field} must be a non-empty string of at most {MAX_SCHEMA_CHARS} characters",
                           field=field)
    if kind == "regex":
        try:
            re.compile(spec)
        except (re.error, RecursionError, OverflowError) as exc:
            raise InvalidInput(f"{field} is not a valid regular expression: {exc}", field=field) from None
    return [kind, spec]
