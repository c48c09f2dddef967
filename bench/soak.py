"""Soak: a steady load for a long while, sampling each process's memory and open files.

    .venv/bin/python -m bench.soak [--minutes 60] [--clients 16] [--tokens 56] [--engine fake] [--tag X]

`clients` REST clients each send a message in a chat of their own, read its reply to
the end over SSE, and start again (a new chat every 20 turns, so the chats stay
short); the web and one worker (the fake engine at 50 tok/s, or --engine vllm for the
flagship model) run under `make run`'s settings (DEBUG on, as `make run` has it).
Every 10 s it samples the RSS and the open file descriptors of the web and of the
worker's process tree; at the end it prints the samples, the growth per minute after
the first two minutes (a least-squares slope), runs, tokens and errors, and writes
bench/out/soak{tag}.{md,json,png}. A process that holds flat shows a slope near 0.
It also samples the CPU of the web, the worker, Redis and Postgres (the stack's own
servers) and prints each one's CPU per run in the first and the last 5 minutes: a
cost that grows with the tables (a query scanning every run so far) shows as a rise.
"""
import argparse
import asyncio
import os
import time

import psutil

from bench import common, report, sse_client
from bench.arm_platform import Client
from bench.platform_stack import Stack

SAMPLE_SECONDS = 10
TURNS_PER_CHAT = 20
CONTENT = "Explain how a for loop walks over a list, and what range returns."


def tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def sample(pids: dict) -> dict:
    out = {}
    for name, pid in pids.items():
        rss = fds = 0
        for proc in tree(pid) if name == "worker" else [psutil.Process(pid)]:
            try:
                rss += proc.memory_info().rss
                fds += proc.num_fds()
            except psutil.NoSuchProcess:
                pass
        out[name] = {"rss_mb": rss / 2**20, "fds": fds}
    return out


CPU_PROCS = ("web", "worker", "redis", "postgres")
TREES = ("worker", "postgres")  # with their children, live and reaped


def cpu_seconds(pids: dict) -> dict:
    out = {}
    for name in CPU_PROCS:
        root = psutil.Process(pids[name])
        procs = tree(pids[name]) if name in TREES else [root]
        total = 0.0
        for proc in procs:
            try:
                t = proc.cpu_times()
                total += t.user + t.system + (t.children_user + t.children_system if proc is root else 0)
            except psutil.NoSuchProcess:
                pass
        out[name] = total
    return out


def cpu_per_run(samples: list[dict], t_from: float, t_to: float) -> dict:
    """CPU ms per run of each process between the samples nearest t_from and t_to."""
    inside = [s for s in samples if t_from <= s["t"] <= t_to]
    if len(inside) < 2 or inside[-1]["runs"] == inside[0]["runs"]:
        return {}
    runs = inside[-1]["runs"] - inside[0]["runs"]
    return {k: 1000 * (inside[-1]["cpu"][k] - inside[0]["cpu"][k]) / runs for k in CPU_PROCS}


def slope_per_minute(points: list[tuple[float, float]]) -> float | None:
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    return 60 * sum((t - mx) * (v - my) for t, v in points) / var if var else None


async def drive(url: str, key: str, stack: Stack, clients: int, tokens: int, seconds: float, pids: dict) -> dict:
    samples, counts = [], {"runs": 0, "tokens": 0, "errors": 0}
    mem_pids = {k: pids[k] for k in ("web", "worker")}
    end = time.monotonic() + seconds
    t0 = time.monotonic()
    async with sse_client.session(limit=0) as http:
        client = Client(url, key, http)

        async def one():
            while time.monotonic() < end:
                chat = (await asyncio.to_thread(stack.make_chats, 1))[0]
                for _ in range(TURNS_PER_CHAT):
                    if time.monotonic() >= end:
                        return
                    req = await client.turn(chat, CONTENT, max_tokens=tokens, retry_conflict=True)
                    counts["runs"] += 1
                    counts["tokens"] += req.tokens
                    counts["errors"] += 1 if req.error else 0

        async def sampler():
            while time.monotonic() < end:
                samples.append({"t": time.monotonic() - t0, **sample(mem_pids), "cpu": cpu_seconds(pids), **counts})
                print(f"[soak] {samples[-1]['t']:5.0f} s: " + ", ".join(
                    f"{k} {samples[-1][k]['rss_mb']:.0f} MB {samples[-1][k]['fds']} fds" for k in mem_pids)
                    + f"; {counts['runs']} runs, {counts['errors']} errors", flush=True)
                await asyncio.sleep(SAMPLE_SECONDS)

        await asyncio.gather(sampler(), *(one() for _ in range(clients)))
    samples.append({"t": time.monotonic() - t0, **sample(mem_pids), "cpu": cpu_seconds(pids), **counts})
    return {"samples": samples, **counts}


def plot(data: dict, names, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, cx) = plt.subplots(1, 2, figsize=(12, 4))
    samples = data["samples"]
    minutes = [s["t"] / 60 for s in samples]
    for name in names:
        ax.plot(minutes, [s[name]["rss_mb"] for s in samples], label=f"{name} RSS")
    ax.set_xlabel("minutes")
    ax.set_ylabel("RSS (MB)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    step = 6  # one point a minute
    for name in CPU_PROCS:
        pts = [((b["t"]) / 60, 1000 * (b["cpu"][name] - a["cpu"][name]) / (b["runs"] - a["runs"]))
               for a, b in zip(samples[::step], samples[step::step]) if b["runs"] > a["runs"]]
        cx.plot([p[0] for p in pts], [p[1] for p in pts], label=name)
    cx.set_xlabel("minutes")
    cx.set_ylabel("CPU ms per run (per minute)")
    cx.grid(True, alpha=0.3)
    cx.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=56)
    ap.add_argument("--engine", choices=("fake", "vllm"), default="fake")
    ap.add_argument("--tag", default="")
    a = ap.parse_args()
    tag = f"_{a.tag}" if a.tag else ""
    stack = Stack(db_name="bench_soak", debug=True)
    try:
        key = stack.seed()
        web, url = stack.start_web()
        env = {"CHATSITE_ENGINE": "fake", "CHATSITE_FAKE_STEP_SECONDS": 0.02} if a.engine == "fake" else {}
        worker = stack.start_worker(a.engine, **env)
        names = ("web", "worker")
        data = asyncio.run(drive(url, key, stack, a.clients, a.tokens, 60 * a.minutes,
                                 {"web": web.pid, "worker": worker.pid, "redis": stack.redis_server.pid,
                                  "postgres": stack.pg_server.pid}))
    finally:
        stack.stop()
    late = [s for s in data["samples"] if s["t"] >= 120]
    rows = []
    for name in names:
        first, last = data["samples"][0][name], data["samples"][-1][name]
        rows.append([name, first["rss_mb"], late[0][name]["rss_mb"] if late else None, last["rss_mb"],
                     slope_per_minute([(s["t"], s[name]["rss_mb"]) for s in late]), first["fds"], last["fds"]])
    text = (f"{a.minutes:.0f} min at {a.clients} clients ({a.engine} engine, {a.tokens}-token replies, DEBUG on): "
            f"{data['runs']} runs, {data['tokens']} tokens, {data['errors']} errors\n"
            + report.table(["process", "RSS start MB", "RSS at 2 min", "RSS end MB", "MB/min after 2 min",
                            "fds start", "fds end"], rows))
    end = data["samples"][-1]["t"]
    first, last = cpu_per_run(data["samples"], 0, 300), cpu_per_run(data["samples"], end - 300, end)
    if first and last:
        text += "\n" + report.table(["process", "CPU ms per run, first 5 min", "last 5 min"],
                                     [[k, first[k], last[k]] for k in CPU_PROCS])
    common.write_json(f"soak{tag}.json", data)
    (common.OUT / f"soak{tag}.md").write_text(text + "\n")
    plot(data, names, common.OUT / f"soak{tag}.png")
    print(text + f"\nplot: bench/out/soak{tag}.png")


if __name__ == "__main__":
    main()
