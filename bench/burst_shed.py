"""A burst into a pool that was quiet: how many requests load shedding refuses (503) while
the pool's workers have room for them.

    .venv/bin/python -m bench.burst_shed [--slots 32] [--burst 96] [--warm 4] [--root DIR]

One worker of `--slots` slots on the fake engine (a run of 64 tokens at 20 ms a step: ~1.3 s),
the pool's default limits (at most 500 queued, an expected wait of at most 60 s). First
`--warm` runs one after another (the last minute's finish rate is then what the pool was
asked for: a few runs), then `--burst` non-streamed /v1 calls at once. Prints how many were
answered 200 and 503 (with the first refusal's words) and when the last answer came.
`--root DIR` runs another checkout's code (an A/B of a change).
"""
import argparse
import asyncio
import collections
import time

from bench import common, sse_client
from bench.platform_stack import Stack


async def _call(http, url: str, auth: dict, i: int) -> tuple[int, str]:
    body = {"model": common.POOL, "messages": [{"role": "user", "content": f"Burst {i}: explain a for loop."}],
            "max_tokens": 64, "temperature": 0.0, "seed": 0, "ignore_eos": True}
    async with http.post(f"{url}/v1/chat/completions", json=body, headers=auth) as resp:
        return resp.status, (await resp.text())[:300]


async def run(url: str, key: str, warm: int, burst: int) -> dict:
    auth = {"Authorization": f"Bearer {key}"}
    async with sse_client.session(limit=0) as http:
        for i in range(warm):
            status, text = await _call(http, url, auth, -1 - i)
            if status != 200:
                raise SystemExit(f"warm-up call refused ({status}): {text}")
        await asyncio.sleep(2)
        t0 = time.perf_counter()
        answers = await asyncio.gather(*(_call(http, url, auth, i) for i in range(burst)))
        took = time.perf_counter() - t0
    statuses = collections.Counter(status for status, _ in answers)
    refused = next((text for status, text in answers if status == 503), "")
    return {"statuses": dict(statuses), "first_refusal": refused, "seconds": took}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slots", type=int, default=32)
    ap.add_argument("--burst", type=int, default=96)
    ap.add_argument("--warm", type=int, default=4)
    ap.add_argument("--root", default=str(common.ROOT))
    a = ap.parse_args()
    stack = Stack(db_name="bench_burst_shed", root=a.root)
    try:
        key = stack.seed()
        _, url = stack.start_web()
        stack.start_worker("burst", CHATSITE_ENGINE="fake", CHATSITE_FAKE_STEP_SECONDS="0.02",
                           CHATSITE_WORKER_SLOTS=str(a.slots))
        out = asyncio.run(run(url, key, a.warm, a.burst))
    finally:
        stack.stop()
    print(f"code of {a.root}: {a.warm} runs, then a burst of {a.burst} /v1 calls into a worker of {a.slots} slots: "
          f"answered {out['statuses']} in {out['seconds']:.1f} s")
    if out["first_refusal"]:
        print(f"first refusal: {out['first_refusal']}")


if __name__ == "__main__":
    main()
