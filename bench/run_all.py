"""Every benchmark of issue 7, one after another (never two at once: each owns the
CPU), printing the tables; about 25 minutes on the 2-core machine.

    .venv/bin/python -m bench.run_all [--skip multiturn] [--tag NAME]

Writes bench/out/: compare*.{md,png}, platform_only.md, multiturn.{md,png},
profile_*.{txt,svg} and RESULTS_RAW.md (all tables, the commit, the machine's load).
"""
import argparse
import datetime
import subprocess
import sys

from bench import common

STEPS = {
    "compare": ["-m", "bench.compare", "--profile"],
    "platform_only": ["-m", "bench.platform_only", "--profile"],
    "multiturn": ["-m", "bench.multiturn"],
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip", default="", help="comma-separated: compare, platform_only, multiturn")
    ap.add_argument("--tag", default="")
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    commit = subprocess.run(["git", "log", "-1", "--format=%h %s"], cwd=common.ROOT, capture_output=True,
                            text=True).stdout.strip()
    parts = [f"# Raw results ({datetime.datetime.now():%Y-%m-%d %H:%M}, code at {commit})\n"]
    failed = []
    for name, args in STEPS.items():
        if name in skip:
            continue
        if name == "compare" and a.tag:
            args = args + ["--tag", a.tag]
        print(f"\n===== {name} (load average {common.loadavg():.1f} on {common.os.cpu_count()} cores)", flush=True)
        proc = subprocess.run([common.PY, *args], cwd=common.ROOT, stdout=subprocess.PIPE, text=True)
        print(proc.stdout, flush=True)
        if proc.returncode != 0:
            failed.append(name)
        parts.append(f"## {name}\n\n```\n{proc.stdout.strip()}\n```\n")
    (common.OUT / f"RESULTS_RAW{'_' + a.tag if a.tag else ''}.md").write_text("\n".join(parts))
    if failed:
        print("FAILED:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
