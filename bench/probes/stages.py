"""A run's path to its first token, stage by stage, from chatsite.stage_trace's marks.

bench.probes.probe_ttft --stages sets CHATSITE_STAGE_TRACE for the web and the worker; this
reads the file after they exit and joins it with the client's own two times (its
POST sent, its first token received). Read one request at a time (--burst 1): a mark
without a run id belongs to the next one with an id in its process.
"""
from collections import defaultdict
from pathlib import Path

from bench import common, report

STAGES = ("client.post", "web.request", "web.saved", "web.committed", "web.dispatched", "worker.received",
          "worker.task", "worker.picked", "worker.leased", "worker.claimed", "worker.submitted",
          "engine.first_output", "writer.first_written", "client.first_token")


def read(path: Path) -> dict[int, dict[str, tuple[float, int, float]]]:
    """run id -> stage -> (epoch s, thread id, thread CPU ms): a tagged stage's first mark,
    an untagged one's last before its process's next tagged mark."""
    runs: dict[int, dict] = defaultdict(dict)
    pending: dict[int, dict] = defaultdict(dict)  # pid -> untagged stages waiting for a run id
    lines = [line.split() for line in path.read_text().splitlines() if line.strip()]
    for t, pid, thread, stage, run, cpu in sorted(lines, key=lambda f: float(f[0])):
        mark = (float(t), int(thread), float(cpu))
        if run == "-":
            pending[int(pid)][stage] = mark
            continue
        marks = runs[int(run)]
        for name, earlier in pending.pop(int(pid), {}).items():
            marks.setdefault(name, earlier)
        marks.setdefault(stage, mark)
    return runs


def table(path: Path, client: list[dict]) -> str:
    """Per step between two stages: wall ms p50 / p95, and the thread's own CPU ms (p50)
    where both marks are one thread's. `client`: probe_ttft's rows (run, w0, ttft ms)."""
    runs = read(path)
    for row in client:
        marks = runs.get(row["run"])
        if marks is not None:
            marks["client.post"] = (row["w0"], 0, 0.0)
            marks["client.first_token"] = (row["w0"] + row["client_ttft_ms"] / 1000, 0, 0.0)
    complete = [m for m in runs.values() if all(s in m for s in STAGES)]
    out = []
    for a, b in zip(STAGES, STAGES[1:]):
        wall = [1000 * (m[b][0] - m[a][0]) for m in complete]
        same = [m[b][2] - m[a][2] for m in complete if m[a][1] == m[b][1] and m[a][1]]
        out.append([f"{a} -> {b}", common.pct(wall, 50), common.pct(wall, 95),
                    common.pct(same, 50) if same else None])
    total = [1000 * (m[STAGES[-1]][0] - m[STAGES[0]][0]) for m in complete]
    out.append(["client TTFT", common.pct(total, 50), common.pct(total, 95), None])
    return (f"{len(complete)} runs with every stage\n"
            + report.table(["step", "wall p50 ms", "p95", "thread CPU p50 ms (one thread)"], out))
