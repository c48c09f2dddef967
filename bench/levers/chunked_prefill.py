"""What chunked prefill buys: the inter-token latency of streams already running
while long prompts arrive, with and without a chunked-prefill budget.

Eight streams decode steadily; a second in, four prompts of ~900 tokens arrive at
once. Without chunking, a step holds a whole long prompt, so every running stream
waits for it; with a budget of B tokens a step holds at most B tokens of prefill,
spreading the prompt over several steps at the cost of the long prompts' TTFT.

    .venv/bin/python -m bench.levers.chunked_prefill [--repeats 3]
"""
import argparse
import asyncio
import json

from bench.levers.engine import OUT, Engine, pct, spec

ARMS = {  # name -> engine args over the demo pool's
    "no chunking": {"enable_chunked_prefill": False, "max_num_batched_tokens": 2048},
    "chunked, budget 2048": {"enable_chunked_prefill": True, "max_num_batched_tokens": 2048},
    "chunked, budget 256": {"enable_chunked_prefill": True, "max_num_batched_tokens": 256},
    "chunked, budget 64": {"enable_chunked_prefill": True, "max_num_batched_tokens": 64},
}
RUNNING, LONG, LONG_WORDS, ARRIVAL_S, RUNNING_TOKENS = 8, 4, 205, 1.0, 900  # ~880-token prompts


def _long_prompt(i: int, rep: int) -> list[dict]:
    words = " ".join(f"w{(i * 104729 + rep * 7 + j * 31) % 1999}" for j in range(LONG_WORDS))
    return [{"role": "user", "content": f"Document {rep}-{i}: {words}. Summarise the document."}]


async def _scenario(e: Engine, rep: int) -> dict:
    tag = f"{rep}-{id(e)}"
    running = [e.stream(e.chat_ids([{"role": "user", "content": f"Explain topic {rep}-{i}."}]), f"run-{tag}-{i}",
                        max_tokens=RUNNING_TOKENS, ignore_eos=True) for i in range(RUNNING)]
    long_ids = [e.chat_ids(_long_prompt(i, rep)) for i in range(LONG)]  # new text each time: no cache hits
    arrivals = [e.stream(ids, f"long-{tag}-{i}", max_tokens=4, delay=ARRIVAL_S) for i, ids in enumerate(long_ids)]
    streams = await asyncio.gather(*running, *arrivals)
    runs, long_streams = streams[:RUNNING], streams[RUNNING:]
    arrive = min(s.sent for s in long_streams)
    done = max(s.times[0] for s in long_streams)  # the last long prompt's first token: prefill over
    window = [b - a for s in runs for a, b in zip(s.times, s.times[1:]) if arrive <= b <= done + 0.05]
    steady = [b - a for s in runs for a, b in zip(s.times, s.times[1:]) if b < arrive]
    timeline = [(b - arrive, b - a) for a, b in zip(runs[0].times, runs[0].times[1:])]
    return {"long_prompt_tokens": sum(map(len, long_ids)) // LONG,
            "steady_itl_p50_ms": pct(steady, 0.5) * 1e3,
            "during_itl_p50_ms": pct(window, 0.5) * 1e3, "during_itl_p99_ms": pct(window, 0.99) * 1e3,
            "during_itl_max_ms": max(window) * 1e3 if window else float("nan"),
            "long_ttft_max_s": max(s.times[0] - s.sent for s in long_streams), "timeline": timeline}


async def _all(repeats: int) -> list[dict]:
    """All arms' engines up at once, taking turns, so load changes hit all alike."""
    engines = {name: Engine(spec(**o)) for name, o in ARMS.items()}
    for e in engines.values():
        await e.__aenter__()
    try:
        for e in engines.values():
            await e.stream(e.chat_ids([{"role": "user", "content": "Explain the for statement."}]), f"warm-{id(e)}",
                           max_tokens=8)
        runs = []
        for rep in range(repeats):
            run = {}
            for name, e in engines.items():
                r = run[name] = await _scenario(e, rep)
                print(f"  {name:22s} steady ITL p50 {r['steady_itl_p50_ms']:6.1f} ms; while {LONG} prompts of "
                      f"{r['long_prompt_tokens']} tokens prefill: ITL p50 {r['during_itl_p50_ms']:6.1f} ms, "
                      f"p99 {r['during_itl_p99_ms']:6.1f} ms, max {r['during_itl_max_ms']:6.1f} ms; "
                      f"long prompts' TTFT max {r['long_ttft_max_s']:.2f} s", flush=True)
            runs.append(run)
        return runs
    finally:
        for e in engines.values():
            await e.__aexit__(None, None, None)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    runs = asyncio.run(_all(args.repeats))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "levers_chunked_prefill.json").write_text(json.dumps({"runs": runs}, indent=1))
    from bench.levers.plots import plot_chunked_prefill

    print("plot:", plot_chunked_prefill(OUT / "levers_chunked_prefill.json"))


if __name__ == "__main__":
    main()
