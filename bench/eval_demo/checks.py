"""The evaluation's prompts (prompts.toml) and the scorer: pure functions of a reply's text.

A reply passes when its prompt's own checks hold, it ended before the length limit
(finish reason "stop"), and no line of it repeats more than MAX_LINE_REPEATS times.
"""
import re
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

PROMPTS_FILE = Path(__file__).with_name("prompts.toml")
MAX_LINE_REPEATS = 3
CHECK_KEYS = frozenset({"any", "all", "none", "regex", "items", "table", "code", "max_words"})

_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+\S")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_WORD_CHAR = re.compile(r"\w")


@dataclass(frozen=True)
class Prompt:
    id: str
    kind: str
    text: str
    checks: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    correct: bool  # the prompt's own checks held
    ended: bool  # finished before the length limit
    no_loop: bool  # no line repeated more than MAX_LINE_REPEATS times

    @property
    def passed(self) -> bool:
        return self.correct and self.ended and self.no_loop


def load_prompts(path: Path = PROMPTS_FILE) -> list[Prompt]:
    """The prompts of `path`; raises ValueError naming a prompt with an unknown check or none."""
    out = []
    for raw in tomllib.loads(path.read_text())["prompt"]:
        checks = {k: v for k, v in raw.items() if k not in ("id", "kind", "text")}
        unknown = set(checks) - CHECK_KEYS
        if unknown or not checks:
            raise ValueError(f"prompt {raw.get('id')!r}: unknown checks {sorted(unknown)} or none")
        out.append(Prompt(raw["id"], raw["kind"], raw["text"], checks))
    return out


def outside_fences(text: str) -> list[str]:
    """The lines of `text` that are not inside a fenced code block."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def code_blocks(text: str) -> list[str]:
    """The bodies of the fenced code blocks of `text` (an unclosed last one too)."""
    blocks, current = [], None
    for line in text.splitlines():
        if _FENCE.match(line):
            if current is None:
                current = []
            else:
                blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def list_items(text: str) -> int:
    """How many numbered or bulleted lines `text` has outside code."""
    return sum(1 for line in outside_fences(text) if _ITEM.match(line))


def table_rows(text: str) -> int:
    """Body rows of the largest Markdown table outside code fences (a header row, a rule
    row of dashes, then rows); 0 when there is none."""
    lines, best = outside_fences(text), 0
    for i in range(len(lines) - 1):
        if _TABLE_ROW.match(lines[i]) and _TABLE_RULE.match(lines[i + 1]):
            rows = 0
            for line in lines[i + 2:]:
                if not _TABLE_ROW.match(line):
                    break
                rows += 1
            best = max(best, rows)
    return best


def most_repeated_line(text: str) -> int:
    """How often the most repeated line occurs: stripped, ignoring blank lines, fences
    and lines with no letter or digit (a table's rule row, a separator)."""
    lines = [line.strip() for line in text.splitlines()]
    counts = Counter(line for line in lines if _WORD_CHAR.search(line) and not _FENCE.match(line))
    return max(counts.values(), default=0)


def checks_hold(checks: dict, text: str) -> bool:
    """Whether `text` passes every check of `checks` (see prompts.toml)."""
    low = text.lower()
    if "any" in checks and not any(s.lower() in low for s in checks["any"]):
        return False
    if "all" in checks and not all(s.lower() in low for s in checks["all"]):
        return False
    if "none" in checks and any(s.lower() in low for s in checks["none"]):
        return False
    if "regex" in checks and not re.search(checks["regex"], text, re.IGNORECASE):
        return False
    if "items" in checks and list_items(text) < checks["items"]:
        return False
    if "table" in checks and table_rows(text) < checks["table"]:
        return False
    if "code" in checks and not any(all(s in block for s in checks["code"]) for block in code_blocks(text)):
        return False
    if "max_words" in checks and len(text.split()) > checks["max_words"]:
        return False
    return True


def judge(prompt: Prompt, text: str, finish_reason: str | None) -> Verdict:
    """The verdict on one reply to `prompt` that ended with `finish_reason`."""
    return Verdict(correct=checks_hold(prompt.checks, text), ended=finish_reason == "stop",
                   no_loop=most_repeated_line(text) <= MAX_LINE_REPEATS)
