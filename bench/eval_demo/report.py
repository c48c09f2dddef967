"""The evaluation's table: score per model x setting, the capital count, as text and Markdown."""
import os

from bench.eval_demo.checks import MAX_LINE_REPEATS, Prompt
from bench.eval_demo.sweep import CAPITAL_SAMPLES, DEFAULT, EVAL_MAX_TOKENS, Outcome

HEADER = ("model", "setting", "score", "right", "ended", "no loop", "Paris", "mean tokens")


def _fmt(setting: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in setting.items() if k != "max_tokens")


def rows(results: dict[str, dict[str, Outcome]], n_prompts: int) -> list[tuple]:
    out = []
    for model, by_setting in results.items():
        for name, o in by_setting.items():
            passed = sum(v.passed for v in o.verdicts)
            out.append((model, name, f"{o.score:.1f}% ({passed}/{n_prompts})", f"{o.share('correct'):.0f}%",
                        f"{o.share('ended'):.0f}%", f"{o.share('no_loop'):.0f}%",
                        f"{o.capital_right()}/{len(o.capital)}", f"{o.mean_tokens():.0f}"))
    return out


def text_table(table: list[tuple]) -> str:
    widths = [max(len(str(r[i])) for r in [HEADER, *table]) for i in range(len(HEADER))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in [HEADER, *table])


def markdown(*, results: dict[str, dict[str, Outcome]], settings: dict[str, dict], prompts: list[Prompt],
             command: str, when: str, base_seed: int, seconds: dict[str, float]) -> str:
    """The report bench/out/eval_demo.md holds."""
    lines = [
        "# The demo's answers, scored (bench/eval_demo)", "",
        f"`{command}` on {when} (base seed {base_seed}; replay with `--seed {base_seed}`).", "",
        f"{len(prompts)} prompts a new user tries (`bench/eval_demo/prompts.toml`), each a fresh chat with a fresh "
        f"seed, through the pool's chat template and the worker's engine request. A reply passes when its own check "
        f"holds (**right**), it ends before {EVAL_MAX_TOKENS} tokens (**ended**) and no line repeats more than "
        f"{MAX_LINE_REPEATS} times (**no loop**); **score** is the share that pass all three. **Paris**: "
        f"{CAPITAL_SAMPLES} more fresh chats asking \"What is the capital of France?\", each judged as that "
        f"prompt is (it names Paris and no other city, ends, does not loop). Engine time: "
        + ", ".join(f"{m} {s:.0f} s" for m, s in seconds.items())
        + f" (the machine's load average at the end: {os.getloadavg()[0]:.1f}).", "",
        "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER),
    ]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows(results, len(prompts))]
    lines += ["", "Settings (each also `max_tokens` " + str(EVAL_MAX_TOKENS) + "):", ""]
    lines += [f"- **{name}**: {_fmt(s)}" + (" (the demo pools' `default_sampling`, `chatsite/pools/demo.py`)"
                                            if name == DEFAULT else "") for name, s in settings.items()]
    for model, by_setting in results.items():
        o = by_setting[DEFAULT]
        lines += ["", f"## {model} at the default", "",
                  "Failed: " + (", ".join(f"`{i}`" for i in o.failed(prompts)) or "none") + ".", "",
                  "The capital question's fresh chats:", ""]
        lines += [f"{i + 1}. {r.text.strip()[:160]!r}" for i, r in enumerate(o.capital)]
    return "\n".join(lines) + "\n"
