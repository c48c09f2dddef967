"""What speculative decoding buys on the demo flagship: acceptance rate and tokens/s
at rising concurrency, without speculation, with n-gram prompt lookup and with the
small demo model drafting.

Two workloads: "fresh" asks 32 different one-turn questions (the reply is not in
the prompt); "repeat" asks the same question a second time, with the first answer
in the conversation (n-gram lookup's best case: the reply copies the context).
Greedy decoding: every arm produces the same tokens, so tokens/s compare directly.
All three engines stay up and take turns at each point, so a shared machine's
changing load hits every arm alike; the plot shows the median and the range.

    .venv/bin/python -m bench.levers.speculation [--concurrency 1 8 32] [--repeats 3]
"""
import argparse
import asyncio
import json
import time

from bench.levers.engine import OUT, Engine, draft_config, mean, ngram_config, spec

TOPICS = ["assert", "assignment", "async", "augassign", "await", "binary", "bitwise", "booleans", "break", "calls",
          "class", "comparisons", "continue", "del", "dict", "exceptions", "for", "function", "global", "if",
          "import", "integers", "lambda", "lists", "nonlocal", "pass", "raise", "return", "strings", "try",
          "while", "with"]
MAX_TOKENS = 96
ARMS = {"none": None, "ngram k=4": ngram_config(4), "draft k=4": draft_config(4)}


def _fresh() -> list[list[dict]]:
    return [[{"role": "user", "content": f"Explain {t}."}] for t in TOPICS]


def _repeat(first_answers: dict[str, str]) -> list[list[dict]]:
    return [[{"role": "user", "content": f"Explain {t}."}, {"role": "assistant", "content": first_answers[t]},
             {"role": "user", "content": f"Explain {t}."}] for t in TOPICS]


async def _level(e: Engine, convs: list[list[dict]], concurrency: int, tag: str) -> dict:
    """Keep `concurrency` requests in flight until every conversation is answered."""
    queue = list(enumerate(convs))
    before = (e.counters.draft_tokens, e.counters.accepted_tokens)
    streams = {}

    async def worker():
        while queue:
            i, conv = queue.pop(0)
            streams[i] = await e.stream(e.chat_ids(conv), f"{tag}-{i}", max_tokens=MAX_TOKENS)

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.monotonic() - started
    tokens = sum(len(s.times) for s in streams.values())
    draft, accepted = e.counters.draft_tokens - before[0], e.counters.accepted_tokens - before[1]
    per_stream = [len(s.times) / (s.times[-1] - s.sent) for s in streams.values() if len(s.times) > 1]
    return {"tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall,
            "stream_tokens_per_s": mean(per_stream), "acceptance": accepted / draft if draft else None,
            "texts": {TOPICS[i]: s.text for i, s in streams.items()}}


async def _all(levels: list[int], repeats: int) -> list[dict]:
    """Every arm's engine held at once; each (workload, concurrency) is measured arm after arm,
    so a shared machine's changing load hits all arms alike. Returns one result dict per repeat."""
    engines = {name: Engine(spec(speculative_config=cfg)) for name, cfg in ARMS.items()}
    for e in engines.values():
        await e.__aenter__()
    try:
        for name, e in engines.items():
            await _level(e, _fresh()[:4], 4, f"{name}-warmup")
        first = (await _level(engines["none"], _fresh(), 8, "first"))["texts"]
        runs = []
        for rep in range(repeats):
            run: dict = {name: {} for name in engines}
            for workload, convs in (("fresh", _fresh()), ("repeat", _repeat(first))):
                for c in levels:
                    for name, e in engines.items():
                        r = await _level(e, convs, c, f"{rep}-{name}-{workload}-{c}")
                        run[name][f"{workload}@{c}"] = r
                        acc = f", acceptance {r['acceptance']:.1%}" if r["acceptance"] is not None else ""
                        print(f"  {name:10s} {workload:6s} concurrency {c:2d}: {r['tokens_per_s']:7.1f} tok/s "
                              f"total, {r['stream_tokens_per_s']:6.1f} tok/s per stream{acc}", flush=True)
                        if r["texts"] != run["none"][f"{workload}@{c}"]["texts"]:
                            print(f"  WARNING: {name} changed greedy replies ({workload}@{c})", flush=True)
            runs.append({n: {k: {kk: vv for kk, vv in v.items() if kk != "texts"} for k, v in r.items()}
                         for n, r in run.items()})
        return runs
    finally:
        for e in engines.values():
            await e.__aexit__(None, None, None)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    runs = asyncio.run(_all(args.concurrency, args.repeats))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "levers_speculation.json").write_text(json.dumps({"concurrency": args.concurrency, "runs": runs},
                                                           indent=1))
    from bench.levers.plots import plot_speculation

    print("plot:", plot_speculation(OUT / "levers_speculation.json"))


if __name__ == "__main__":
    main()
