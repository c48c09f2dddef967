"""Where the platform's time to first token goes, one request at a time.

    .venv/bin/python -m bench.probes.probe_ttft [--engine fake|vllm] [--requests 12] [--burst 64] [--surface v1]
                                         [--stages]

For each request: POST round trip, SSE response headers, first token event (client
clock; with --surface v1 one streamed POST /v1/chat/completions, whose response
headers come when admission is done: both POST and headers are that moment), and from the database queued_at -> started_at (claimed by the worker) ->
first_token_at (the first entry's XADD time). All clocks are this machine's.
With --burst N the requests go N at a time, all started together (as a bench.compare
level starts), so the phases show where a burst's TTFT queues. With --stages (and --burst 1)
the web and the worker mark each stage of a run's path (chatsite/stage_trace.py) and a
second table splits the time to the first token between them (bench/probes/stages.py).
"""
import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from bench import common, report, sse_client
from bench.probes import stages
from bench.platform_stack import Stack


async def probe(url: str, key: str, stack: Stack, n: int, max_tokens: int, burst: int = 1,
                pids: dict | None = None, surface: str = "rest") -> tuple[list[dict], dict]:
    """The phases of every request, and the CPU seconds each of `pids` spent while requests ran."""
    auth, pids = {"Authorization": f"Bearer {key}"}, pids or {}
    out, cpu = [], dict.fromkeys(pids, 0.0)
    async with sse_client.session(limit=0) as http:
        for start in range(0, n, burst):
            chats = []
            for _ in range(min(burst, n - start)):
                if surface == "v1":  # a /v1 call makes its chat in its own admission
                    chats.append(None)
                    continue
                async with http.post(f"{url}/api/chats/", json={"model": common.POOL}, headers=auth) as r:
                    chats.append((await r.json())["id"])
            await asyncio.sleep(0.3)
            before = {k: common.cpu_seconds(pid) for k, pid in pids.items()}
            timed = await asyncio.gather(*(_one(http, url, auth, chat, start + j, max_tokens) if chat is not None
                                           else _one_v1(http, url, auth, start + j, max_tokens)
                                           for j, chat in enumerate(chats)))
            for k, pid in pids.items():
                cpu[k] += common.cpu_seconds(pid) - before[k]
            out += [_phases(stack, t) for t in timed]  # the database read after the burst, not during it
            await asyncio.sleep(0.5)
    return out, cpu


async def _one(http, url: str, auth: dict, chat: str, i: int, max_tokens: int) -> dict:
    t0, w0 = time.perf_counter(), time.time()
    body = {"content": f"Probe {i}: explain a for loop.", "max_tokens": max_tokens, "temperature": 0.0,
            "top_p": 1.0, "seed": 0, "ignore_eos": True}
    async with http.post(f"{url}/api/chats/{chat}/messages/", json=body, headers=auth) as r:
        reply = await r.json()
    if "run" not in reply:
        raise SystemExit(f"POST refused ({r.status}): {reply}")
    run = reply["run"]
    t_post = time.perf_counter()
    async with http.get(url + run["events_url"], headers=auth) as resp:
        t_headers = time.perf_counter()
        t_first = None
        async for ev in sse_client.events(resp):
            if ev.event == "token" and t_first is None:
                t_first = ev.t
            if ev.event in ("done", "error"):
                break
    return {"run": run["id"], "t0": t0, "w0": w0, "t_post": t_post, "t_headers": t_headers, "t_first": t_first,
            "t_end": time.perf_counter()}


async def _one_v1(http, url: str, auth: dict, i: int, max_tokens: int) -> dict:
    t0, w0 = time.perf_counter(), time.time()
    body = {"model": common.POOL, "messages": [{"role": "user", "content": f"Probe {i}: explain a for loop."}],
            "max_tokens": max_tokens, "temperature": 0.0, "top_p": 1.0, "seed": 0, "ignore_eos": True, "stream": True}
    async with http.post(f"{url}/v1/chat/completions", json=body, headers=auth) as resp:
        if resp.status != 200:
            raise SystemExit(f"POST refused ({resp.status}): {(await resp.text())[:300]}")
        t_headers, t_first = time.perf_counter(), None
        async for ev in sse_client.events(resp):
            if ev.data == "[DONE]":
                break
            if t_first is None and any("content" in (c.get("delta") or {}) and "role" not in c["delta"]
                                       for c in ev.json().get("choices") or ()):
                t_first = ev.t
    return {"run": int(resp.headers["X-Run-Id"]), "t0": t0, "w0": w0, "t_post": t_headers, "t_headers": t_headers,
            "t_first": t_first, "t_end": time.perf_counter()}


def _phases(stack: Stack, t: dict) -> dict:
    with stack.sql() as conn:
        for _ in range(100):  # finalize runs just after the terminal entry
            q, s, f = conn.execute("select extract(epoch from queued_at), extract(epoch from started_at), "
                                   "extract(epoch from first_token_at) from runs_generationrun where id = %s",
                                   (t["run"],)).fetchone()
            if f is not None:
                break
            time.sleep(0.05)
    ms = lambda x: 1000 * x  # noqa: E731
    t0, w0 = t["t0"], t["w0"]
    return {"run": t["run"], "w0": w0,
            "post_ms": ms(t["t_post"] - t0), "sse_headers_ms": ms(t["t_headers"] - t["t_post"]),
            "client_ttft_ms": ms(t["t_first"] - t0), "e2e_ms": ms(t["t_end"] - t0),
            "post_to_queued_ms": ms(float(q) - w0), "queued_to_claimed_ms": ms(float(s) - float(q)),
            "claimed_to_first_xadd_ms": ms(float(f) - float(s)),
            "first_xadd_to_client_ms": ms(t["t_first"] - t0) - ms(float(f) - w0)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="fake")
    ap.add_argument("--requests", type=int, default=12)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--burst", type=int, default=1, help="requests started together (1: one at a time)")
    ap.add_argument("--surface", choices=("rest", "v1"), default="rest",
                    help="rest: POST a message, then GET its events; v1: one streamed POST /v1/chat/completions")
    ap.add_argument("--stages", action="store_true", help="mark each stage in the web and the worker (--burst 1)")
    a = ap.parse_args()
    trace = Path(tempfile.mkdtemp()) / "stages.txt"
    if a.stages:
        os.environ["CHATSITE_STAGE_TRACE"] = str(trace)  # the stack's processes inherit it
    stack = Stack(db_name="bench_probe")
    try:
        key = stack.seed()
        with stack.sql() as conn:  # a burst measures the queue, it is not shed
            conn.execute("update pools_modelpool set max_queue_wait_seconds = 100000, max_queued_runs = 100000")
        web, url = stack.start_web()
        env = {"CHATSITE_ENGINE": "fake", "CHATSITE_FAKE_STEP_SECONDS": "0.005"} if a.engine == "fake" else \
            {"VLLM_CPU_KVCACHE_SPACE": "2"}
        env["CHATSITE_WORKER_SLOTS"] = str(max(8, a.burst))  # as bench.compare: a burst is held at once
        worker = stack.start_worker("probe", **env)
        pids = {"web": web.pid, "worker": worker.pid}
        rows, cpu = asyncio.run(probe(url, key, stack, a.requests, a.max_tokens, a.burst, pids, a.surface))
    finally:
        stack.stop()
    keys = [k for k in rows[0] if k not in ("run", "w0")]
    how = "sequential requests" if a.burst == 1 else f"requests in bursts of {a.burst}"
    print(f"engine {a.engine}, {a.requests} {how} through {a.surface}, p50, p95 and max (ms)")
    print(report.table(["phase", "p50", "p95", "max"],
                       [[k, common.pct([r[k] for r in rows], 50), common.pct([r[k] for r in rows], 95),
                         max(r[k] for r in rows)] for k in keys]))
    print("CPU while requests ran, ms per request: " +
          ", ".join(f"{k} {1000 * v / a.requests:.1f}" for k, v in cpu.items()) +
          (" (the worker's includes the engine's front end and, with vllm, not its engine core)"
           if a.engine != "fake" else ""))
    if a.stages:
        print("\nStages of a run's path to its first token (chatsite/stage_trace.py)")
        print(stages.table(trace, rows))


if __name__ == "__main__":
    main()
