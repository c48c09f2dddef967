"""The benchmarks, one after another (never two at once: each owns the CPU), printing
the tables; about 50 minutes on the 2-core machine (bench/run.sh runs this).

    .venv/bin/python -m bench.run_all [--skip multiturn,soak] [--tag NAME]

Writes bench/out/: floor*, worker_capacity*, per_run*, compare*.{md,png}, platform_only*.md,
multiturn.{md,png}, soak*.{md,png}, profile_*.txt and RESULTS_RAW.md (all tables, the commit,
the machine's load). Today's figures are in bench/out/RESULTS.md, their history in HISTORY.md.
"""
import argparse
import datetime
import subprocess
import sys

from bench import common

STEPS = {
    "floor": ["-m", "bench.floor"],
    "worker_capacity": ["-m", "bench.worker_capacity"],
    "per_run": ["-m", "bench.per_run"],
    "per_run_v1": ["-m", "bench.per_run", "--surface", "v1", "--tag", "v1"],
    "compare": ["-m", "bench.compare", "--openai", "--profile"],
    "platform_only": ["-m", "bench.platform_only", "--profile"],
    "multiturn": ["-m", "bench.multiturn"],
    "multiturn_engine": ["-m", "bench.multiturn_engine"],
    "soak": ["-m", "bench.soak", "--minutes", "5"],
}
TAGGED = {"floor", "worker_capacity", "per_run", "compare", "platform_only", "soak"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip", default="", help="comma-separated names of STEPS to leave out")
    ap.add_argument("--tag", default="")
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    git = lambda *args: subprocess.run(["git", *args], cwd=common.ROOT, capture_output=True,  # noqa: E731
                                       text=True).stdout.strip()
    dirty = git("status", "--short", "--untracked-files=no", "--", "chatsite", "workers", "inference")
    parts = [f"# Raw results ({datetime.datetime.now():%Y-%m-%d %H:%M}, code at {git('log', '-1', '--format=%h %s')})",
             f"\nuncommitted platform changes in the working tree that ran:\n```\n{dirty or 'none'}\n```\n"]
    failed = []
    for name, args in STEPS.items():
        if name in skip:
            continue
        if name in TAGGED and a.tag:
            args = args + ["--tag", a.tag]
        print(f"\n===== {name} (load average {common.loadavg():.1f} on {common.os.cpu_count()} cores)", flush=True)
        proc = subprocess.Popen([common.PY, *args], cwd=common.ROOT, stdout=subprocess.PIPE, text=True)
        lines = []
        for line in proc.stdout:  # live progress, and the whole output for the report
            print(line, end="", flush=True)
            lines.append(line)
        if proc.wait() != 0:
            failed.append(name)
        parts.append(f"## {name}\n\n```\n{''.join(lines).strip()}\n```\n")
    (common.OUT / f"RESULTS_RAW{'_' + a.tag if a.tag else ''}.md").write_text("\n".join(parts))
    if failed:
        print("FAILED:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
