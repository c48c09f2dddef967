"""What a busy thread costs another thread's round trips, by GIL switch interval.

    .venv/bin/python -m bench.probes.gil_convoy [--trips 200] [--intervals 5,1,0.5] [--tag X]

A thread doing round trips to Redis (as a request thread does to Postgres and Redis,
or a worker's task thread when it claims a run) releases the GIL while it waits for
each reply; when another thread is running Python meanwhile (the web's event loop,
vLLM's output loop in a worker), the first thread waits for the GIL to come back
after every reply: up to the switch interval (sys.setswitchinterval, 5 ms by
default). Per interval: the wall time of `trips` PINGs in one thread, alone and
while another thread spins in Python, and the per-trip p50 / p95. Uses the Redis at
REDIS_URL (default 127.0.0.1:6379, db 0). Writes bench/out/gil_convoy[_TAG].md.

The platform keeps Python's default: with the web's and the worker's interval at
0.5 ms, neither bench.probes.probe_ttft nor bench.compare moved a figure consistently for the
better, and CPU per token at concurrency 1 rose (bench/out/HISTORY.md, Session 15).
"""
import argparse
import os
import sys
import threading
import time

import redis

from bench import common


def _trips(client: redis.Redis, n: int) -> tuple[float, list[float]]:
    """Wall seconds for `n` round trips, and each trip's seconds."""
    each = []
    start = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        client.ping()
        each.append(time.perf_counter() - t)
    return time.perf_counter() - start, each


def _with_spinner(client: redis.Redis, n: int) -> tuple[float, list[float]]:
    stop = threading.Event()

    def spin():
        x = 0
        while not stop.is_set():
            for _ in range(1000):
                x += 1

    th = threading.Thread(target=spin, daemon=True)
    th.start()
    time.sleep(0.05)
    try:
        return _trips(client, n)
    finally:
        stop.set()
        th.join()


def measure(intervals: list[float], trips: int) -> list[dict]:
    client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    client.ping()
    before = sys.getswitchinterval()
    rows = []
    try:
        for ms in intervals:
            sys.setswitchinterval(ms / 1000)
            alone, alone_each = _trips(client, trips)
            busy, busy_each = _with_spinner(client, trips)
            rows.append({"switch_ms": ms, "alone_ms": alone * 1e3, "busy_ms": busy * 1e3,
                         "alone_p50_ms": common.pct(alone_each, 50) * 1e3,
                         "busy_p50_ms": common.pct(busy_each, 50) * 1e3,
                         "busy_p95_ms": common.pct(busy_each, 95) * 1e3})
    finally:
        sys.setswitchinterval(before)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trips", type=int, default=200)
    ap.add_argument("--intervals", default="5,1,0.5,5,1,0.5", help="switch intervals in ms, run in this order")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    rows = measure([float(x) for x in args.intervals.split(",")], args.trips)
    lines = [f"# GIL convoy: {args.trips} Redis round trips in one thread, alone and beside a spinning thread", "",
             "| switch ms | alone ms | beside a spinner ms | trip p50 alone ms | trip p50 / p95 beside ms |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['switch_ms']:g} | {r['alone_ms']:.1f} | {r['busy_ms']:.1f} | {r['alone_p50_ms']:.3f} | "
                     f"{r['busy_p50_ms']:.2f} / {r['busy_p95_ms']:.2f} |")
    tag = f"_{args.tag}" if args.tag else ""
    (common.OUT / f"gil_convoy{tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
