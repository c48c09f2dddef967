"""The sampling settings the evaluation compares, and how one model's sweep is scored.

Each setting is a pool's `default_sampling`: a fresh chat that asks for nothing gets
it (clean_sampling over an unsaved pool row, as the door admits a run), with a fresh
seed per chat. Every setting runs at the same reply limit, EVAL_MAX_TOKENS.
"""
import random
from dataclasses import dataclass, field

from bench.eval_demo.checks import Prompt, Verdict, judge
from bench.eval_demo.engine import Ask, Reply
from chatsite.pools.demo import DEMO_SAMPLING
from chatsite.pools.models import ModelPool
from chatsite.runs.validation import clean_sampling
from inference.engine_config import DEMO_CONTEXT_LENGTH

EVAL_MAX_TOKENS = DEMO_SAMPLING["max_tokens"]  # every setting at the default reply limit
CAPITAL_PROMPT_ID = "capital-france"
CAPITAL_SAMPLES = 10  # fresh chats asking "What is the capital of France?" per setting
DEFAULT = "default"  # the setting that is the demo pools' default_sampling (chatsite/pools/demo.py)

SETTINGS: dict[str, dict] = {  # beside the default; more were tried: bench/out/eval_demo_explore.md
    "greedy": {"temperature": 0.0},
    "t0.7 p0.95 (old default)": {"temperature": 0.7, "top_p": 0.95},
    "t0.7 minp0.1 rep1.1": {"temperature": 0.7, "top_p": 1.0, "min_p": 0.1, "repetition_penalty": 1.1},
    "t0.3 p0.9 freq0.3": {"temperature": 0.3, "top_p": 0.9, "frequency_penalty": 0.3},
}


def settings_for_run(names: list[str] | None) -> dict[str, dict]:
    """The settings to run, each with EVAL_MAX_TOKENS, and the demo's default (always; a
    listed setting equal to it runs once, under DEFAULT). Raises KeyError for an unknown name."""
    default = {k: v for k, v in DEMO_SAMPLING.items() if k != "max_tokens"}
    out = {name: {**SETTINGS[name], "max_tokens": EVAL_MAX_TOKENS} for name in (names or SETTINGS)
           if SETTINGS[name] != default}
    out[DEFAULT] = {**default, "max_tokens": EVAL_MAX_TOKENS}
    return out


@dataclass
class Outcome:
    """One setting's replies on one model."""

    verdicts: list[Verdict] = field(default_factory=list)  # per prompt, in prompts.toml's order
    replies: list[Reply] = field(default_factory=list)
    capital: list[Reply] = field(default_factory=list)  # CAPITAL_SAMPLES fresh chats
    capital_verdicts: list[Verdict] = field(default_factory=list)

    @property
    def score(self) -> float:
        return 100 * sum(v.passed for v in self.verdicts) / len(self.verdicts)

    def share(self, what: str) -> float:
        return 100 * sum(getattr(v, what) for v in self.verdicts) / len(self.verdicts)

    def capital_right(self) -> int:
        """Fresh chats that named Paris (and no other city), ended, and did not loop."""
        return sum(v.passed for v in self.capital_verdicts)

    def mean_tokens(self) -> float:
        return sum(r.tokens for r in self.replies) / len(self.replies)

    def failed(self, prompts: list[Prompt]) -> list[str]:
        return [p.id for p, v in zip(prompts, self.verdicts) if not v.passed]


def asks_for(pool: str, model_dir: str, setting: dict, prompts: list[Prompt], rng: random.Random) -> list[Ask]:
    """Every prompt once, then the capital question CAPITAL_SAMPLES times, each a fresh chat
    with a fresh seed, under `setting` as the pool's default sampling."""
    row = ModelPool(name=pool, model=model_dir, default_sampling=setting, context_length=DEMO_CONTEXT_LENGTH,
                    max_output_tokens=max(setting["max_tokens"], 1))
    capital = next(p for p in prompts if p.id == CAPITAL_PROMPT_ID)
    texts = [p.text for p in prompts] + [capital.text] * CAPITAL_SAMPLES
    return [Ask(text, clean_sampling(row, seed=rng.randrange(2**31))) for text in texts]


def score(prompts: list[Prompt], replies: list[Reply]) -> Outcome:
    """Judge the replies of asks_for's asks (prompts first, then the capital samples)."""
    mine, capital = replies[:len(prompts)], replies[len(prompts):]
    question = next(p for p in prompts if p.id == CAPITAL_PROMPT_ID)
    return Outcome([judge(p, r.text, r.finish_reason) for p, r in zip(prompts, mine)], mine, capital,
                   [judge(question, r.text, r.finish_reason) for r in capital])
