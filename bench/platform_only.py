"""The platform alone: the fake engine (costs nothing, emits at a chosen pace), so
every CPU second measured is the platform's own: the worker (engine host, stream
writer, Celery), Redis, and the web process (admission + SSE).

    .venv/bin/python -m bench.platform_only [--seconds 10] [--profile] [--rate 50]

Sweep "streams": N concurrent runs, one SSE client each, each run 128 tokens at
50 tokens/s (--rate), N doubling until the p99 delivery delay (XADD -> client) passes
50 ms. Sweep "fan-out": 16 runs at 50 tokens/s, each read by K SSE clients at once
(a run watched from several devices), K doubling: how many clients one web process
keeps under 50 ms. The delay is the client's receive time minus the stream entry
id (Redis stamps it with its clock at XADD, same machine), so the resolution is 1 ms.
"""
import argparse
import asyncio
import math
import os
import time

from bench import common, report, sse_client
from bench.arm_platform import Client
from bench.platform_stack import Stack

STEP_SECONDS = 0.02  # 50 tokens/s per stream, a typical GPU decode pace
TOKENS = common.OUTPUT_TOKENS
DELAY_LIMIT_MS = 50.0
# A worker holds a Postgres connection for each run it generates (the Celery thread
# keeps its Django connection for the whole task) and the server is shared with a
# limit of 100, so the stream sweep stops at 48 runs; the fan-out sweep goes further.
STREAMS = (1, 4, 8, 16, 32, 48)
FANOUT_RUNS = 16
FANOUT = (1, 2, 4, 8, 16, 32, 64)
CONTENT = "Explain how a for loop walks over a list, and what range returns."
# A run not ended this long after its POST counts as an error, and its client goes on: this
# stack runs no Celery beat, so no sweep re-dispatches a run whose lease lapsed (a paused VM
# did that once, and the bench waited for its 16 runs forever).
RUN_TIMEOUT_SECONDS = 120.0


async def follow(client: Client, events_url: str, delays: list, counts: list) -> None:
    """One extra SSE reader of a run (fan-out), from the start of the stream."""
    sent_ms = time.time() * 1000
    async with client.http.get(client.url + events_url, headers=client.auth) as resp:
        async for ev in sse_client.events(resp):
            if ev.event == "token":
                written = int(ev.id.split("-")[0])
                if written >= sent_ms:
                    delays.append(ev.wall_ms - written)
                counts.append(ev.json()["n"])
            elif ev.event in ("done", "error"):
                return


async def level(stack: Stack, client: Client, pids: dict, *, runs: int, readers: int, seconds: float,
                tokens: int = TOKENS) -> dict:
    """`runs` clients, each posting messages back to back for `seconds`; each run read
    by `readers` SSE clients (the poster plus readers - 1 followers)."""
    per_client = 3 * math.ceil(seconds / (tokens * STEP_SECONDS)) + 4
    chats = iter(await asyncio.to_thread(stack.make_chats, runs * per_client))
    delays: list[float] = []
    extra: list[int] = []
    reqs: list[common.Request] = []

    async def one_client():
        while time.monotonic() < deadline:
            chat = next(chats, None)
            if chat is None:
                return
            posted = asyncio.get_running_loop().create_future()
            started = time.perf_counter()
            req_task = asyncio.create_task(asyncio.wait_for(
                client.turn(chat, CONTENT, max_tokens=tokens, delays=delays, on_run=posted), RUN_TIMEOUT_SECONDS))
            followers = []
            if readers > 1:  # the run's events URL, or nothing when the POST failed (its task ended without one)
                await asyncio.wait({posted, req_task}, return_when=asyncio.FIRST_COMPLETED)
                url = posted.result() if posted.done() else None
                if url:
                    followers = [asyncio.wait_for(follow(client, url, delays, extra), RUN_TIMEOUT_SECONDS)
                                 for _ in range(readers - 1)]
            results = await asyncio.gather(req_task, *followers, return_exceptions=True)
            first = results[0]
            if isinstance(first, BaseException):  # TimeoutError: no end within RUN_TIMEOUT_SECONDS
                first = common.Request(start=started, end=time.perf_counter(),
                                       error=f"no end within {RUN_TIMEOUT_SECONDS:.0f} s ({type(first).__name__})")
            reqs.append(first)

    end = time.monotonic() + 60
    while await asyncio.to_thread(stack.pg_free_connections) < runs + 20 and time.monotonic() < end:
        await asyncio.sleep(1)  # the Postgres server is shared: leave room for the others
    deadline = time.monotonic() + seconds
    meter = common.CpuMeter(pids)
    client.post_retries = client.snapshots = 0
    meter.start()
    with stack.pg_connections() as pg:
        await asyncio.gather(*(one_client() for _ in range(runs)))
    cpu = meter.stop()
    ok = [r for r in reqs if not r.error]
    run_tokens = tokens
    tokens = sum(r.tokens for r in ok) + sum(extra)
    wall = cpu["wall_s"]
    per_k = {k: (1000 * v / tokens if v is not None and tokens else None) for k, v in cpu["proc_cpu_s"].items()}
    return {"runs": runs, "readers": readers, "run_tokens": run_tokens, "completed_runs": len(ok),
            "snapshots": client.snapshots, "clients": runs * readers, "offered_tok_s": runs * readers / STEP_SECONDS,
            "tok_s": tokens / wall, "tokens": tokens, "requests": len(reqs), "errors": len(reqs) - len(ok),
            "post_retries": client.post_retries, "error_samples": [r.error for r in reqs if r.error][:3],
            "delivery_ms_p50": common.pct(delays, 50), "delivery_ms_p99": common.pct(delays, 99),
            "delivery_ms_max": max(delays) if delays else None,
            "ttft_p50_ms": common.ms(common.pct([r.ttft for r in ok if r.ttft], 50)),
            "cpu": cpu, "cpu_s_per_1k_tokens": per_k,
            "platform_us_per_token": 1000 * sum(per_k.get(k) or 0 for k in ("web", "worker", "redis")),
            "others_cpu_pct": report.others_share({"cpu": cpu}), "pg_peak": pg.peak, "pg_server_peak": pg.server_peak,
            "pg_mean_lock_waiters": pg.mean_lock_waiters, "pg_lock_waits_by_query": pg.waiting_queries.most_common(5)}


async def sweep(stack, client, pids, name, shapes, seconds) -> list[dict]:
    out = []
    for runs, readers in shapes:
        r = await level(stack, client, pids, runs=runs, readers=readers, seconds=seconds)
        out.append(r)
        print(f"[{name}] runs={runs} readers={readers}: {r['tok_s']:.0f} tok/s delivered, p99 "
              f"{report.fmt(r['delivery_ms_p99'])} ms, platform {r['platform_us_per_token']:.0f} us/token, "
              f"errors {r['errors']}", flush=True)
        over = [x["delivery_ms_p99"] is None or x["delivery_ms_p99"] > DELAY_LIMIT_MS for x in out]
        if name != "streams" and len(out) >= 3 and over[-2:] == [True, True]:  # the knee is behind us
            break
    return out


async def profile_web(stack, client, pids, runs: int, seconds: int = 12, tag: str = "") -> dict:
    out = {}
    for fmt, ext in (("raw", "txt"), ("flamegraph", "svg")):
        procs = [await asyncio.create_subprocess_exec(
            str(common.ROOT / ".venv" / "bin" / "py-spy"), "record", "-p", str(pids[name]), "-d", str(seconds),
            "-r", "100", "--nonblocking", "--gil", "-f", fmt, "-o", str(common.OUT / f"profile_fake{tag}_{name}.{ext}"),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL) for name in ("web", "worker")]
        for name in ("web", "worker"):
            out[f"{name}_{fmt}"] = f"bench/out/profile_fake{tag}_{name}.{ext}"
        await level(stack, client, pids, runs=runs, readers=1, seconds=seconds)
        for p in procs:
            await p.wait()
    return out


async def run(stack, url, key, pids, seconds, profile, tag="", streams=STREAMS, fanout=FANOUT, cost=True) -> dict:
    async with sse_client.session(limit=0) as http:
        client = Client(url, key, http)
        await level(stack, client, pids, runs=4, readers=1, seconds=3)  # warm-up
        out = {"streams": await sweep(stack, client, pids, "streams", [(n, 1) for n in streams], seconds),
               "fanout": await sweep(stack, client, pids, "fan-out", [(FANOUT_RUNS, k) for k in fanout], seconds)}
        if cost:
            out["cost"] = await cost_model(stack, client, pids)
        if profile:
            out["profile"] = await profile_web(stack, client, pids, runs=32, tag=tag)
        return out


async def cost_model(stack, client, pids, *, runs: int = 16, lengths=(64, 512), seconds: float = 12) -> dict:
    """Split each process's CPU into a cost per run (POST, claim, finalize, SSE setup)
    and a cost per streamed token (XADD, XREAD, SSE frame): the same load with short
    and long replies, then CPU = per_run * runs + per_token * tokens, solved per process."""
    a, b = [await level(stack, client, pids, runs=runs, readers=1, seconds=seconds, tokens=n) for n in lengths]
    out = {"levels": [a, b], "per_run_ms": {}, "per_token_us": {}}
    for proc in a["cpu"]["proc_cpu_s"]:
        (r1, t1, c1), (r2, t2, c2) = [(x["completed_runs"], x["tokens"], x["cpu"]["proc_cpu_s"][proc] or 0.0)
                                      for x in (a, b)]
        det = r1 * t2 - r2 * t1
        if det:
            out["per_run_ms"][proc] = 1000 * (c1 * t2 - c2 * t1) / det
            out["per_token_us"][proc] = 1e6 * (r1 * c2 - r2 * c1) / det
    print(f"[cost] per run ms {fmt_map(out['per_run_ms'])}; per token us {fmt_map(out['per_token_us'])}", flush=True)
    return out


def fmt_map(d: dict) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in d.items())


def cost_table(cost: dict) -> str:
    procs = list(cost["per_run_ms"])
    rows = [[f"{x['run_tokens']}-token runs", x["completed_runs"], x["tokens"], x["tok_s"],
             *[x["cpu"]["proc_cpu_s"][p] for p in procs]] for x in cost["levels"]]
    rows.append(["=> CPU per run (ms)", None, None, None, *[cost["per_run_ms"][p] for p in procs]])
    rows.append(["=> CPU per token (us)", None, None, None, *[cost["per_token_us"][p] for p in procs]])
    return report.table([f"load (16 streams, {1 / STEP_SECONDS:.0f} tok/s each)", "runs", "tokens", "tok/s",
                         *[f"{p} CPU s" for p in procs]], rows)


def tables(data: dict) -> str:
    def rows(levels):
        return [[r["runs"], r["readers"], r["clients"], r["offered_tok_s"], r["tok_s"], r["delivery_ms_p50"],
                 r["delivery_ms_p99"], r["ttft_p50_ms"], r["cpu_s_per_1k_tokens"].get("worker"),
                 r["cpu_s_per_1k_tokens"].get("redis"), r["cpu_s_per_1k_tokens"].get("web"),
                 r["platform_us_per_token"], r["cpu_s_per_1k_tokens"].get("postgres"),
                 r["cpu_s_per_1k_tokens"].get("client"), f"{r['errors']}/{r['requests']}",
                 r.get("pg_mean_lock_waiters"), r["others_cpu_pct"]] for r in levels]
    head = ["runs", "readers/run", "SSE clients", "offered tok/s", "delivered tok/s", "XADD->client p50 ms", "p99 ms",
            "TTFT p50 ms", "worker CPU s/1k tok", "redis", "web", "platform us/tok (worker+redis+web)",
            "postgres s/1k (whole server)", "client s/1k", "errors", "PG lock waiters (mean)",
            "others' CPU %"]
    text = []
    for name in ("streams", "fanout"):
        levels = data[name]
        ok = [r for r in levels if r["delivery_ms_p99"] is not None and r["delivery_ms_p99"] <= DELAY_LIMIT_MS]
        best = max(ok, key=lambda r: r["tok_s"]) if ok else None
        text.append(f"Sweep {name} (fake engine, {1 / STEP_SECONDS:.0f} tok/s per run, {TOKENS}-token runs)\n"
                    + report.table(head, rows(levels)))
        text.append(f"  most sustained with p99 <= {DELAY_LIMIT_MS:.0f} ms: "
                    + (f"{best['tok_s']:.0f} tok/s, {best['clients']} SSE clients" if best else "none"))
    if "cost" in data:
        text.append("CPU per run and per streamed token (two run lengths, solved per process; postgres is the "
                    "whole shared server, approximate)\n" + cost_table(data["cost"]))
    return "\n\n".join(text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0, help="per level")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--tag", default="")
    ap.add_argument("--streams", default=",".join(map(str, STREAMS)))
    ap.add_argument("--fanout", default=",".join(map(str, FANOUT)), help="readers per run; empty to skip")
    ap.add_argument("--no-cost", action="store_true", help="skip the per-run / per-token CPU split")
    ap.add_argument("--rate", type=float, default=50.0, help="tokens per second per run")
    ap.add_argument("--root", default=str(common.ROOT), help="the checkout whose web and worker run (an A/B)")
    a = ap.parse_args()
    global STEP_SECONDS
    STEP_SECONDS = 1 / a.rate
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    tag = f"_{a.tag}" if a.tag else ""
    stack = Stack(db_name="bench_platform", root=a.root)
    try:
        key = stack.seed()
        web, url = stack.start_web()
        worker = stack.start_worker("fake", CHATSITE_ENGINE="fake", CHATSITE_FAKE_STEP_SECONDS=STEP_SECONDS,
                                    CHATSITE_WORKER_SLOTS=max(STREAMS) + 8)
        pids = {"worker": worker.pid, "web": web.pid, **stack.server_pids(), "client": os.getpid()}
        data = asyncio.run(run(stack, url, key, pids, a.seconds, a.profile, tag, ints(a.streams), ints(a.fanout),
                               not a.no_cost))
        common.write_json(f"platform_only{tag}.json", data)
    finally:
        stack.stop()
    text = tables(data)
    text = f"{a.seconds:.0f} s of new runs per level\n\n" + text
    (common.OUT / f"platform_only{tag}.md").write_text(text + "\n")
    print(text)
    if "profile" in data:
        from bench import profiles

        print("\n" + profiles.summary(data["profile"]))


if __name__ == "__main__":
    main()
