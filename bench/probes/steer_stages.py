"""A "send now"'s path from its POST to the steered run's first token, stage by stage, from
chatsite.stage_trace's marks (bench.steer --stages sets CHATSITE_STAGE_TRACE for the web and
the worker; this reads the file after they exit).

A round names two runs: the one stopped (its marks up to its finalize) and the one steered
to (its admission, dispatch, claim, the wait for the stopped reply's save, first token); a
second table follows the round's plain message (the target's warm TTFT) through the same
stages from its POST. The row before each table's last: the platform's part, per round (from
the admission's save to the claim its prompt is built from). A mark with no run id (the
request's arrival, Celery's receipt, the task's start) is the last of its name between the
send now and the round's next tagged stage (rounds run one at a time).
"""
from collections import defaultdict
from pathlib import Path

from bench import common, report

# (stage, whose run id tags it: "stopped", "steered" (PLAIN: "plain") or None for an untagged mark). The
# stop is asked first, then the steered run admitted (chatsite.runs.services.queued.send_now): two chains
# that meet at the steered run's claim, which waits for the stopped reply's save (worker.settled).
STAGES = (("client.send_now", "client"), ("web.request", None), ("web.stop_asked", "stopped"),
          ("writer.cancel_seen", "stopped"), ("writer.stop_written", "stopped"), ("worker.ended", "stopped"),
          ("finalize.saved", "stopped"), ("web.saved", "steered"), ("web.committed", "steered"),
          ("web.dispatched", "steered"), ("web.send_now_saved", "stopped"), ("worker.received", None),
          ("worker.task", None), ("worker.leased", "steered"), ("worker.claimed", "steered"),
          ("worker.settled", "steered"), ("worker.submitted", "steered"), ("engine.first_output", "steered"),
          ("writer.first_written", "steered"), ("stream.first_token", "client"))
# The plain message sent after it, as warm (its TTFT is the target's base): the same stages from its POST.
PLAIN = tuple((stage, "plain" if whose == "steered" else whose) for stage, whose in STAGES
              if whose != "stopped" and stage != "worker.settled")
# The platform's part, free of the HTTP request before it and the engine after it: from the steered run's
# admission's save to its claim with the stopped reply in its prompt (the dispatch, and the stop and the
# reply's save where they take longer), and the plain message's from its admission's save to its claim;
# their difference is what steering adds.
SPAN = ("web.saved", "worker.settled")
PLAIN_SPAN = ("web.saved", "worker.claimed")


def _read(path: Path) -> tuple[dict, dict]:
    """(run id -> stage -> first epoch s, stage -> sorted epoch s of its untagged marks)"""
    tagged: dict[int, dict[str, float]] = defaultdict(dict)
    untagged: dict[str, list[float]] = defaultdict(list)
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        t, _pid, _thread, stage, run, _cpu = line.split()
        if run == "-":
            untagged[stage].append(float(t))
        else:
            tagged[int(run)].setdefault(stage, float(t))
    return tagged, {k: sorted(v) for k, v in untagged.items()}


def round_marks(tagged: dict, untagged: dict, row: dict, stages=STAGES) -> dict[str, float]:
    """One round's stages. `row`: bench.steer's (stopped, steered, t0, first token epoch s), or
    for PLAIN a plain message's (plain, t0, first token epoch s)."""
    marks = {"client.send_now": row["t0"], "stream.first_token": row["first_token_at"]}
    for stage, whose in stages:
        if whose not in (None, "client") and stage in tagged.get(row[whose], {}):
            marks[stage] = tagged[row[whose]][stage]
    for i, (stage, whose) in enumerate(stages):
        if whose is not None:
            continue
        before = next((marks[s] for s, _ in stages[i + 1:] if s in marks), None)
        inside = [t for t in untagged.get(stage, ()) if row["t0"] <= t and (before is None or t <= before)]
        if inside:
            marks[stage] = inside[-1]
    if "worker.claimed" in marks and "worker.settled" not in marks and ("worker.settled", "steered") in stages:
        marks["worker.settled"] = marks["worker.claimed"]  # the reply was saved when admitted: nothing to wait for
    return marks


def table(path: Path, rows: list[dict], *, plain: bool = False) -> str:
    """Per step between two stages that every round has: wall ms p50 and p90. `plain`: the
    rounds' plain messages (`row["plain"]`: its run id, POST and first token epoch s)."""
    tagged, untagged = _read(path)
    stages = PLAIN if plain else STAGES
    rows = [{"plain": r["plain"][0], "t0": r["plain"][1], "first_token_at": r["plain"][2]} for r in rows] \
        if plain else rows
    rounds = [round_marks(tagged, untagged, row, stages) for row in rows]
    names = [s for s, _ in stages if all(s in m for m in rounds)]
    out = []
    for a, b in zip(names, names[1:]):
        wall = [1000 * (m[b] - m[a]) for m in rounds]
        out.append([f"{a} -> {b}", common.pct(wall, 50), common.pct(wall, 90)])
    first, last = PLAIN_SPAN if plain else SPAN
    if first in names and last in names:
        span = [1000 * (m[last] - m[first]) for m in rounds]  # per round, not a sum of the medians above
        out.append([f"{first} -> {last} (the platform's part)", common.pct(span, 50), common.pct(span, 90)])
    total = [1000 * (m[names[-1]] - m[names[0]]) for m in rounds]
    out.append([f"{names[0]} -> {names[-1]}", common.pct(total, 50), common.pct(total, 90)])
    return f"{len(rounds)} rounds\n" + report.table(["step", "wall p50 ms", "p90"], out)
