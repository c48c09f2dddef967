"""Arm (a), the ceiling: vLLM's AsyncLLM in process, no HTTP, no Redis.

    .venv/bin/python -m bench.arm_engine OUT.json [--levels 1,8,32,64]   # run the levels, write JSON
    .venv/bin/python -m bench.arm_engine --serve                         # driven by bench.compare

Builds AsyncEngineArgs exactly as a worker does (inference.specs over
DEMO_ENGINE_ARGS), streams DELTA outputs, and records when each reached us.
In --serve mode it loads the engine, prints READY, then for each line
`{"concurrency": C}` on stdin runs that level and prints `RESULT {json}` with
every request's arrivals (the caller pools and summarizes them).
"""
import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import asdict

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB, as every arm gets

from bench import common  # noqa: E402


class EngineArm:
    def __init__(self, prompts):
        self.prompts = prompts
        self._ids = iter(range(10**9))

    async def start(self) -> None:
        from vllm.sampling_params import RequestOutputKind, SamplingParams
        from vllm.v1.engine.async_llm import AsyncLLM

        self.engine = AsyncLLM.from_engine_args(common.engine_spec().engine_args())
        if common.colocate_baselines():
            from inference.cpu_affinity import colocate_engine_core

            colocate_engine_core()
        self.params = SamplingParams(n=1, max_tokens=common.OUTPUT_TOKENS, temperature=0.0, seed=0, ignore_eos=True,
                                     output_kind=RequestOutputKind.DELTA)
        await common.drive(4, 8, self.one)  # warm-up

    async def one(self, i: int) -> common.Request:
        req = common.Request(start=time.perf_counter())
        try:
            async for o in self.engine.generate({"prompt_token_ids": self.prompts[i][1]}, self.params,
                                                f"bench-{next(self._ids)}"):
                n = len(o.outputs[0].token_ids)
                if n:
                    req.arrivals.append((time.perf_counter(), n))
                if o.finished:
                    req.usage_tokens = req.tokens
        except Exception as exc:  # recorded, not fatal: the table shows errors
            req.error = f"{type(exc).__name__}: {exc}"
        req.end = time.perf_counter()
        return req

    async def level(self, c: int) -> tuple[list[common.Request], float]:
        return await common.drive(c, common.requests_for(c), self.one)


async def serve() -> None:
    arm = EngineArm(common.make_contents(max(map(common.requests_for, common.LEVELS))))
    await arm.start()
    print("READY " + json.dumps({"pids": {"engine_proc": os.getpid(), **common.children(os.getpid())}}), flush=True)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line.strip():
            break
        reqs, wall = await arm.level(json.loads(line)["concurrency"])
        print("RESULT " + json.dumps({"wall": wall, "requests": [asdict(r) for r in reqs]}), flush=True)
    arm.engine.shutdown()


async def standalone(out: str, levels: list[int]) -> None:
    arm = EngineArm(common.make_contents(max(map(common.requests_for, levels))))
    await arm.start()
    pids = {"engine_proc": os.getpid(), **common.children(os.getpid())}
    results = {"arm": "a", "levels": {}}
    for c in levels:
        meter = common.CpuMeter(pids)
        meter.start()
        reqs, wall = await arm.level(c)
        results["levels"][c] = {**common.summarize(reqs, wall, common.OUTPUT_TOKENS), "cpu": meter.stop()}
        print(f"[a] c={c}: {results['levels'][c]['tok_s']:.0f} tok/s", flush=True)
    common.write_json(out, results)
    arm.engine.shutdown()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--levels", default=",".join(map(str, common.LEVELS)))
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    asyncio.run(serve() if a.serve else standalone(a.out, [int(x) for x in a.levels.split(",")]))
