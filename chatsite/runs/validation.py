"""Validation of what a client asks a run to do; each failure names the problem."""
import math
import secrets
from dataclasses import dataclass

from django.conf import settings

from chatsite.errors import InvalidInput

MAX_STOP_SEQUENCES = 4
MAX_STOP_CHARS = 64
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class Sampling:
    max_tokens: int
    temperature: float
    top_p: float
    stop: tuple[str, ...]
    seed: int
    ignore_eos: bool = False


def has_surrogates(value: str) -> bool:
    """Whether `value` holds a lone UTF-16 surrogate (a JSON "\\ud800" escape): not
    text, and refused by Postgres."""
    return any(0xD800 <= ord(c) <= 0xDFFF for c in value)


def clean_text(value, *, field: str, max_chars: int, allow_empty: bool = False) -> str:
    """A message body: a string of valid Unicode without NUL bytes, at most
    `max_chars`, and not blank unless `allow_empty`."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string", field=field)
    if "\x00" in value:
        raise InvalidInput(f"{field} contains a NUL byte, which is not allowed", field=field)
    if has_surrogates(value):
        raise InvalidInput(f"{field} is not valid UTF-8 text (it has an unpaired surrogate escape)", field=field)
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{field} must not be empty", field=field)
    if len(value) > max_chars:
        raise InvalidInput(f"{field} is {len(value)} characters; the limit is {max_chars}", field=field)
    return value


def _number(value, *, field: str, lo: float, hi: float, lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{field} must be a number", field=field)
    value = float(value)
    if not math.isfinite(value) or value > hi or value < lo or (lo_open and value == lo):
        bound = f"greater than {lo}" if lo_open else f"at least {lo}"
        raise InvalidInput(f"{field} must be {bound} and at most {hi}", field=field)
    return value


def clean_sampling(pool, *, max_tokens=None, temperature=None, top_p=None, stop=None, seed=None,
                   ignore_eos=None) -> Sampling:
    """The run's sampling, from the client's values over the pool's defaults."""
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
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InvalidInput(f"seed must be an integer between 0 and {MAX_SEED}", field="seed")
    if ignore_eos is not None and not isinstance(ignore_eos, bool):
        raise InvalidInput("ignore_eos must be true or false", field="ignore_eos")
    return Sampling(max_tokens, temperature, top_p, tuple(stop), seed, bool(ignore_eos))
