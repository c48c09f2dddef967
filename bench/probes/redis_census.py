"""Redis's commands per run, by command: what a run costs Redis apart from its tokens' entries.

    .venv/bin/python -m bench.probes.redis_census [--surface rest|v1] [--requests 200] [--burst 8] [--max-tokens 32]

The fake engine serves runs on a private stack (bench/platform_stack.py); after a few
warm-up runs Redis's command statistics are reset, `requests` runs go through the API
in bursts, and `INFO commandstats` is read: calls and microseconds per run for each
command (a Lua script's own calls counted as theirs, the script in EVALSHA / EVAL).
The microseconds are Redis's time inside the commands, not its I/O: its process CPU per
run is higher (bench.platform_only, bench.per_run measure that).
"""
import argparse
import asyncio

from bench import report
from bench.platform_stack import Stack
from bench.probes.probe_ttft import probe


def census(stats: dict, runs: int) -> list[list]:
    rows = [[name.removeprefix("cmdstat_"), v["calls"] / runs, v["usec"] / runs, v["usec_per_call"]]
            for name, v in stats.items()]
    return sorted(rows, key=lambda r: -r[2])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--surface", choices=("rest", "v1"), default="rest")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--burst", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    a = ap.parse_args()
    stack = Stack(db_name="bench_census")
    try:
        key = stack.seed()
        web, url = stack.start_web()
        stack.start_worker("census", CHATSITE_ENGINE="fake", CHATSITE_FAKE_STEP_SECONDS="0.005",
                           CHATSITE_WORKER_SLOTS=str(max(8, a.burst)))
        asyncio.run(probe(url, key, stack, 8, a.max_tokens, 1, {}, a.surface))  # warm-up, not counted
        redis = stack.redis()
        redis.config_resetstat()
        asyncio.run(probe(url, key, stack, a.requests, a.max_tokens, a.burst, {}, a.surface))
        stats = redis.info("commandstats")
    finally:
        stack.stop()
    rows = census(stats, a.requests)
    calls, usec = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{a.requests} runs of {a.max_tokens} tokens through {a.surface} in bursts of {a.burst} (fake engine): "
          f"{calls:.1f} Redis commands and {usec:.0f} us inside them per run")
    print(report.table(["command", "calls per run", "us per run", "us per call"], rows))


if __name__ == "__main__":
    main()
