"""How many tokens per second one worker process carries from a zero-cost engine.

    .venv/bin/python -m bench.worker_capacity [--streams 50,100,200,300] [--rate 200] [--seconds 10]

The fake engine steps every 1/rate seconds and gives each active run one token per
step, costing next to nothing (one timer per step for all runs), so the worker's CPU
is the platform's own: the engine host handing steps over, the stream writer's
fenced appends (20 ms coalescing), Celery. Runs are long (they never end inside a
level) and nobody reads them over SSE, so the web is not in the way. Per level:
tokens/s written to Redis (counted from the streams), worker CPU per token, Redis
CPU per token, and whether the worker kept up (written / offered).
"""
import argparse
import asyncio
import os
import time

from bench import common, report
from bench.arm_platform import Client
from bench.platform_stack import Stack
from bench import sse_client

CONTENT = "Explain how a for loop walks over a list."


def stream_tokens(r, run_ids: list[int]) -> int:
    """Tokens written so far to these runs' streams (the seq + n of each stream's last token entry)."""
    pipe = r.pipeline(transaction=False)
    for rid in run_ids:
        pipe.xrevrange(f"run:{rid}", count=1)
    total = 0
    for entries in pipe.execute():
        for _, fields in entries:
            value = fields.get("t")
            if value:
                seq, n, _ = value.split(" ", 2)
                total += int(seq) + int(n)
    return total


async def start_runs(stack, url: str, key: str, n: int, tokens: int) -> list[int]:
    chats = stack.make_chats(n)
    body = {"content": CONTENT, "max_tokens": tokens, "temperature": 0.0, "ignore_eos": True}
    async with sse_client.session(limit=0) as http:
        client = Client(url, key, http)

        async def post(chat):
            async with http.post(f"{url}/api/chats/{chat}/messages/", json=body, headers=client.auth) as r:
                assert r.status == 202, await r.text()
                return (await r.json())["run"]["id"]

        ids = []
        for i in range(0, n, 20):
            ids += await asyncio.gather(*(post(c) for c in chats[i:i + 20]))
        return ids


def level(stack, url, key, pids, n: int, rate: float, seconds: float) -> dict:
    tokens = int(rate * (seconds + 20))  # longer than the level: no run ends inside it
    ids = asyncio.run(start_runs(stack, url, key, n, tokens))
    r = stack.redis()
    time.sleep(3)  # all claimed and streaming
    meter = common.CpuMeter(pids)
    t0 = stream_tokens(r, ids)
    meter.start()
    time.sleep(seconds)
    cpu = meter.stop()
    written = stream_tokens(r, ids) - t0
    wall = cpu["wall_s"]
    r.zadd("runs:cancelled", {str(i): time.time() for i in ids})  # stop them (the writer sees it at once)
    end = time.monotonic() + 60
    with stack.sql() as conn:
        while time.monotonic() < end and conn.execute(
                "select count(*) from runs_generationrun where status in ('queued', 'running')").fetchone()[0]:
            time.sleep(0.5)
    per_tok = {k: (1e6 * v / written if v is not None and written else None) for k, v in cpu["proc_cpu_s"].items()}
    return {"streams": n, "offered_tok_s": n * rate, "tok_s": written / wall, "kept_up": written / (wall * n * rate),
            "worker_us_per_token": per_tok["worker"], "redis_us_per_token": per_tok["redis"],
            "worker_cpu_pct": 100 * (cpu["proc_cpu_s"]["worker"] or 0) / wall,
            "machine_busy_pct": 100 * cpu["machine_busy_s"] / (wall * os.cpu_count())}


def plot(rows: list[dict], rate: float, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4))
    streams = [r["streams"] for r in rows]
    ax.plot(streams, [r["offered_tok_s"] for r in rows], "--", color="grey", label="offered")
    ax.plot(streams, [r["tok_s"] for r in rows], "o-", label="written to Redis")
    ax.axhline(40000, color="red", lw=0.8, label="target 40k tok/s")
    ax.set_xlabel(f"streams at {rate:.0f} tok/s each")
    ax.set_ylabel("tokens/s through one worker")
    ax2 = ax.twinx()
    ax2.plot(streams, [r["worker_us_per_token"] for r in rows], "s:", color="C2", label="worker us/token")
    ax2.set_ylabel("worker CPU us per token")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left")
    ax2.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="50,100,200,300")
    ap.add_argument("--rate", type=float, default=200.0, help="tokens per second per stream")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--tag", default="")
    a = ap.parse_args()
    levels = [int(x) for x in a.streams.split(",") if x]
    stack = Stack(db_name="bench_worker_capacity")
    rows = []
    try:
        key = stack.seed()
        with stack.sql() as conn:  # room for the longest level
            longest = int(a.rate * (a.seconds + 60))
            conn.execute("update pools_modelpool set max_output_tokens = %s, context_length = %s, "
                         "max_queued_runs = 100000 where name = %s", (longest, longest + 512, common.POOL))
        web, url = stack.start_web()
        worker = stack.start_worker("fake", CHATSITE_ENGINE="fake", CHATSITE_FAKE_STEP_SECONDS=1 / a.rate,
                                    CHATSITE_WORKER_SLOTS=max(levels) + 8)
        pids = {"worker": worker.pid, "redis": stack.server_pids()["redis"]}
        for n in levels:
            row = level(stack, url, key, pids, n, a.rate, a.seconds)
            rows.append(row)
            print(f"[worker] {n} streams x {a.rate:.0f} tok/s: {row['tok_s']:.0f} tok/s written "
                  f"({100 * row['kept_up']:.0f}% of offered), worker {row['worker_us_per_token']:.1f} us/token "
                  f"({row['worker_cpu_pct']:.0f}% of a core), redis {row['redis_us_per_token']:.1f} us/token",
                  flush=True)
    finally:
        stack.stop()
    tag = f"_{a.tag}" if a.tag else ""
    common.write_json(f"worker_capacity{tag}.json", rows)
    text = report.table(["streams", "offered tok/s", "written tok/s", "kept up", "worker us/token", "worker % of a core",
                         "redis us/token", "machine busy %"],
                        [[r["streams"], r["offered_tok_s"], r["tok_s"], f"{100 * r['kept_up']:.0f}%",
                          r["worker_us_per_token"], r["worker_cpu_pct"], r["redis_us_per_token"],
                          r["machine_busy_pct"]] for r in rows])
    (common.OUT / f"worker_capacity{tag}.md").write_text(text + "\n")
    plot(rows, a.rate, common.OUT / f"worker_capacity{tag}.png")
    print(text + f"\nplot: bench/out/worker_capacity{tag}.png")


if __name__ == "__main__":
    main()
