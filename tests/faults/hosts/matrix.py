"""One row of the fault matrix: what a fault did to the runs it hit, measured.

Each figure comes from what a user or an operator could see: the client's SSE
frames (seq and text), the run's stream in Redis, the saved message in Postgres, and
the superseded worker's own engine counter (its heartbeat's `generated_tokens`).
"""
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from chatsite.runs.models import GenerationRun
from chatsite.runs.stream import codec
from chatsite.runs.stream.log import rebuild
from tests.faults.client import Followed
from tests.faults.helpers import stream_entries, wait_terminal

_ROOT = Path(__file__).resolve().parents[3]
# Where the table goes: var/ (untracked) unless FAULT_MATRIX_OUT names a file, so a test
# session does not rewrite the committed bench/out/fault_matrix.md with its own figures.
OUT = Path(os.environ.get("FAULT_MATRIX_OUT") or _ROOT / "var" / "fault_matrix.md")
LAST: list["Row"] = []  # the rows of the last module run, for the terminal summary


@dataclass
class Row:
    fault: str
    runs: int = 0
    lost: int = 0  # tokens of the requested reply the client never got
    duplicates: int = 0  # token positions the client got more than once
    text_mismatches: int = 0  # runs whose client text != saved message != stream text
    terminal_ok: int = 0  # runs with exactly one terminal entry, and it last
    late_writes: int = 0  # token entries of an attempt appended after a later attempt's first
    superseded_tokens: int | str | None = None  # its engine's tokens after the takeover, or "<=N" (None: no takeover)
    stall_seconds: float = 0.0  # the longest gap between two SSE frames the victim's client got
    note: str = ""

    def add_run(self, redis_client, run_id: int, followed: Followed, *, requested: int,
                counts_stall: bool = True) -> GenerationRun:
        """Measure one finished run into this row (no assertion: the test asserts the row)."""
        saved = wait_terminal(run_id)
        entries = stream_entries(redis_client, run_id)
        terminals = sum(e.is_terminal for e in entries)
        self.runs += 1
        self.terminal_ok += int(terminals == 1 and bool(entries) and entries[-1].is_terminal)
        newest = 0
        for e in entries:
            if e.type == codec.TOKEN:
                self.late_writes += int(e.attempt < newest)
                newest = max(newest, e.attempt)
        got = Counter()
        for ev in followed.events:
            if ev.event == "token":
                got.update(range(ev.data["seq"], ev.data["seq"] + ev.data["n"]))
        self.lost += max(0, requested - len(got))
        self.duplicates += sum(n - 1 for n in got.values())
        saved_text, stream_text = saved.assistant_message.content, rebuild(entries).text
        self.text_mismatches += int(not (followed.text.encode() == saved_text.encode() == stream_text.encode()))
        if counts_stall:
            self.stall_seconds = max(self.stall_seconds, followed.longest_stall())
        return saved


def written_positions(entries, attempt: int) -> int:
    """How many distinct token positions `attempt` wrote to the stream."""
    return len({p for e in entries if e.type == codec.TOKEN and e.attempt == attempt
                for p in range(e.seq, e.seq + e.n)})


HEADER = ("fault", "runs", "lost", "duplicates", "text != saved", "terminal 1 and last", "late writes",
          "superseded engine's tokens after takeover", "longest client stall (s)", "note")


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows:
        superseded = "-" if r.superseded_tokens is None else str(r.superseded_tokens)
        cells = (r.fault, r.runs, r.lost, r.duplicates, r.text_mismatches, f"{r.terminal_ok}/{r.runs}",
                 r.late_writes, superseded, f"{r.stall_seconds:.2f}", r.note)
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def write(rows: list[Row]) -> None:
    LAST[:] = rows
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        "# Fault matrix across hosts\n\n"
        "Written by `FAULT_MATRIX_OUT=bench/out/fault_matrix.md .venv/bin/python -m pytest tests/faults/hosts -q -s`\n"
        "(tests/faults/hosts/): each host a network namespace; fake engine at 10 ms a token; lease 4 s;\n"
        "sweep every second.\n"
        "`superseded engine's tokens after takeover`: the superseded worker's engine counter (its heartbeat,\n"
        "once it is back) at the end minus the counter it logged when it stopped the attempt, when it stopped\n"
        "before the takeover (before the sweep found its lease gone: attempt 2 is claimed after that);\n"
        "otherwise `<=N`, N what its engine generated and never wrote (it wrote nothing after the takeover,\n"
        "so that bounds it).\n\n"
        + table(rows) + "\n")
