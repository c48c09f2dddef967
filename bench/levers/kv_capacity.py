"""What an FP8 KV cache buys: KV capacity in tokens (as the engine sized it) and the
batch it admits, before and after, at the same KV memory.

1) capacity: for each dtype arm the engine reports num_gpu_blocks x block_size in
   1 GiB of KV memory; the planner's prediction (chatsite.pools.kv_plan) beside it.
2) admissible batch: a small KV memory (a stand-in for a GPU whose HBM is mostly
   weights) and 64 requests of ~480 tokens each; the engine's own count of running
   requests shows how many it admits at once, and what that does to tokens/s.

    .venv/bin/python -m bench.levers.kv_capacity [--repeats 2]
"""
import argparse
import asyncio
import json
import time

from bench.levers.engine import OUT, Engine, mean, spec

ARMS = {  # name -> engine args over the demo pool's
    "float32": {},
    "float32 + FP8 KV": {"kv_cache_dtype": "fp8"},
    "bfloat16": {"dtype": "bfloat16"},
    "bfloat16 + FP8 KV": {"dtype": "bfloat16", "kv_cache_dtype": "fp8"},
}
SMALL_KV_BYTES = 8 * 2**20  # 8 MiB: 4,096 float32 tokens of the flagship
REQUESTS, PROMPT_WORDS, MAX_TOKENS = 64, 96, 64  # ~360 prompt tokens


def _planned_tokens(overrides: dict, kv_bytes: int) -> int:
    import dataclasses

    from chatsite.pools.kv_plan import Gpu, ModelShape, kv_plan, load_config

    shape = dataclasses.replace(ModelShape.from_config(load_config(spec().model)),
                                dtype=overrides.get("dtype", "float32"))
    gpu = Gpu("KV memory only", kv_bytes, bandwidth_bytes_per_s=1.0)  # bandwidth unused here
    return kv_plan(shape, gpu, weights_bytes=0, overhead_bytes=0,
                   kv_cache_dtype=overrides.get("kv_cache_dtype", "auto")).kv_tokens


def _prompt(i: int) -> list[dict]:
    words = " ".join(f"item{(i * 7919 + j) % 997}" for j in range(PROMPT_WORDS))
    return [{"role": "user", "content": f"Request {i}: {words}. Explain the for statement."}]


async def _capacity(overrides: dict) -> dict:
    async with Engine(spec(**overrides)) as e:
        return {"kv_tokens": e.kv_tokens, "planned_tokens": _planned_tokens(overrides, 2**30),
                "start_s": e.start_seconds}


async def _batch(e: Engine, rep: int) -> dict:
    ids = [e.chat_ids(_prompt(rep * REQUESTS + i)) for i in range(REQUESTS)]  # fresh prompts: no cache hits
    e.counters.peak_running = 0
    started = time.monotonic()
    streams = await asyncio.gather(*(e.stream(x, f"kv-{rep}-{i}", max_tokens=MAX_TOKENS, ignore_eos=True)
                                     for i, x in enumerate(ids)))
    wall = time.monotonic() - started
    tokens = sum(len(s.times) for s in streams)
    ttft = sorted(s.times[0] - s.sent for s in streams)
    per_request = int(mean(len(x) for x in ids)) + MAX_TOKENS
    return {"kv_tokens": e.kv_tokens, "tokens_per_request": per_request, "admissible": e.kv_tokens // per_request,
            "peak_running": e.counters.peak_running, "tokens_per_s": tokens / wall, "wall_s": wall,
            "ttft_p50_s": ttft[len(ttft) // 2], "ttft_max_s": ttft[-1]}


async def _batches(repeats: int) -> list[dict]:
    """All arms' small-KV engines up at once, taking turns, so load changes hit all alike."""
    engines = {name: Engine(spec(**o), kv_cache_bytes=SMALL_KV_BYTES) for name, o in ARMS.items()}
    for e in engines.values():
        await e.__aenter__()
    try:
        runs = []
        for rep in range(repeats):
            run = {}
            for name, e in engines.items():
                b = run[name] = await _batch(e, rep)
                print(f"  {name:18s} in 8 MiB: {b['kv_tokens']:,} tokens -> {b['admissible']} requests of "
                      f"{b['tokens_per_request']} tokens; peak running {b['peak_running']}, "
                      f"{b['tokens_per_s']:.0f} tok/s, TTFT p50 {b['ttft_p50_s']:.2f} s max {b['ttft_max_s']:.2f} s",
                      flush=True)
            runs.append(run)
        return runs
    finally:
        for e in engines.values():
            await e.__aexit__(None, None, None)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    capacity = {}
    for name, overrides in ARMS.items():  # deterministic: measured once
        cap = capacity[name] = asyncio.run(_capacity(overrides))
        print(f"  {name:18s} 1 GiB of KV holds {cap['kv_tokens']:>9,} tokens (planner {cap['planned_tokens']:,})",
              flush=True)
    batches = asyncio.run(_batches(args.repeats))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "levers_kv_capacity.json").write_text(json.dumps({"capacity": capacity, "runs": batches}, indent=1))
    from bench.levers.plots import plot_kv_capacity

    print("plot:", plot_kv_capacity(OUT / "levers_kv_capacity.json"))


if __name__ == "__main__":
    main()
