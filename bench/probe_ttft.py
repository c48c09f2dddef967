"""Where the platform's time to first token goes, one request at a time.

    .venv/bin/python -m bench.probe_ttft [--engine fake|vllm] [--requests 12]

For each request: POST round trip, SSE response headers, first token event (client
clock), and from the database queued_at -> started_at (claimed by the worker) ->
first_token_at (the first entry's XADD time). All clocks are this machine's.
"""
import argparse
import asyncio
import time

from bench import common, report, sse_client
from bench.platform_stack import Stack


async def probe(url: str, key: str, stack: Stack, n: int, max_tokens: int) -> list[dict]:
    auth = {"Authorization": f"Bearer {key}"}
    out = []
    async with sse_client.session(limit=0) as http:
        for i in range(n):
            async with http.post(f"{url}/api/chats/", json={"model": common.POOL}, headers=auth) as r:
                chat = (await r.json())["id"]
            await asyncio.sleep(0.3)
            t0, w0 = time.perf_counter(), time.time()
            body = {"content": f"Probe {i}: explain a for loop.", "max_tokens": max_tokens, "temperature": 0.0,
                    "top_p": 1.0, "seed": 0, "ignore_eos": True}
            async with http.post(f"{url}/api/chats/{chat}/messages/", json=body, headers=auth) as r:
                run = (await r.json())["run"]
            t_post = time.perf_counter()
            async with http.get(url + run["events_url"], headers=auth) as resp:
                t_headers = time.perf_counter()
                t_first = None
                async for ev in sse_client.events(resp):
                    if ev.event == "token" and t_first is None:
                        t_first = ev.t
                    if ev.event in ("done", "error"):
                        break
            t_end = time.perf_counter()
            with stack.sql() as conn:
                for _ in range(100):  # finalize runs just after the terminal entry
                    q, s, f = conn.execute("select extract(epoch from queued_at), extract(epoch from started_at), "
                                           "extract(epoch from first_token_at) from runs_generationrun where id = %s",
                                           (run["id"],)).fetchone()
                    if f is not None:
                        break
                    await asyncio.sleep(0.05)
            ms = lambda x: 1000 * x  # noqa: E731
            out.append({"post_ms": ms(t_post - t0), "sse_headers_ms": ms(t_headers - t_post),
                        "client_ttft_ms": ms(t_first - t0), "e2e_ms": ms(t_end - t0),
                        "post_to_queued_ms": ms(float(q) - w0), "queued_to_claimed_ms": ms(float(s) - float(q)),
                        "claimed_to_first_xadd_ms": ms(float(f) - float(s)),
                        "first_xadd_to_client_ms": ms(t_first - t0) - ms(float(f) - w0)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="fake")
    ap.add_argument("--requests", type=int, default=12)
    ap.add_argument("--max-tokens", type=int, default=32)
    a = ap.parse_args()
    stack = Stack(db_name="bench_probe")
    try:
        key = stack.seed()
        _, url = stack.start_web()
        env = {"CHATSITE_ENGINE": "fake", "CHATSITE_FAKE_STEP_SECONDS": "0.005"} if a.engine == "fake" else \
            {"VLLM_CPU_KVCACHE_SPACE": "2"}
        stack.start_worker("probe", **env)
        rows = asyncio.run(probe(url, key, stack, a.requests, a.max_tokens))
    finally:
        stack.stop()
    keys = list(rows[0])
    print(f"engine {a.engine}, {a.requests} sequential requests, medians and max (ms)")
    print(report.table(["phase", "p50", "max"], [[k, common.pct([r[k] for r in rows], 50), max(r[k] for r in rows)]
                                                  for k in keys]))


if __name__ == "__main__":
    main()
