"""Multi-turn chat: time to first token of turn N (N = 1..6) as the conversation
grows, with the prefix cache and affinity routing against without.

    .venv/bin/python -m bench.multiturn [--conversations 8] [--arms cache,nocache,affinity,noaffinity]

Arms (each starts its own worker(s) on the real vLLM engine):
  cache       1 worker, enable_prefix_caching true (the demo pool's setting)
  nocache     1 worker, enable_prefix_caching false
  affinity    2 workers of the pool (cores 0 and 1), prefix cache on, affinity on
  noaffinity  2 workers, prefix cache on, CHATSITE_AFFINITY=0 (a turn goes to whichever worker is free)
Conversations run in parallel, each turn waits for the previous reply; TTFT is
measured by the client from the POST to the first token event.
"""
import argparse
import asyncio
import time

from bench import common, report, sse_client
from bench.arm_platform import Client
from bench.platform_stack import Stack

TURNS = 6
REPLY_TOKENS = 64
THINK_SECONDS = 1.0  # between a reply's last token and the next question, as a person reading it
USER_WORDS = ("How does a Python dictionary keep its keys, what happens on a collision, and why must a key be "
              "hashable? Give an example with strings and tuples and say what changes").split()
ARMS = {
    "cache": {"workers": 1, "engine_args": {"enable_prefix_caching": True}, "affinity": True},
    "nocache": {"workers": 1, "engine_args": {"enable_prefix_caching": False}, "affinity": True},
    "affinity": {"workers": 2, "engine_args": {"enable_prefix_caching": True}, "affinity": True},
    "noaffinity": {"workers": 2, "engine_args": {"enable_prefix_caching": True}, "affinity": False},
}


def user_message(conv: int, turn: int) -> str:
    return f"Conversation {conv}, question {turn}: " + " ".join(USER_WORDS)


async def conversation(client: Client, conv: int, out: dict) -> None:
    chat = (await client.new_chats(1))[0]
    for turn in range(1, TURNS + 1):
        if turn > 1:
            await asyncio.sleep(THINK_SECONDS)
        req = await client.turn(chat, user_message(conv, turn), max_tokens=REPLY_TOKENS, retry_conflict=True)
        out.setdefault(turn, []).append(req)
        if req.error:
            return


def prompt_tokens(stack: Stack, run_ids) -> dict:
    with stack.sql() as conn:
        return dict(conn.execute("select id, prompt_tokens from runs_generationrun where id = any(%s)",
                                 (list(run_ids),)).fetchall())


def run_arm(stack: Stack, key: str, name: str, conversations: int) -> dict:
    spec = ARMS[name]
    stack.set_engine_args(spec["engine_args"])
    affinity = "1" if spec["affinity"] else "0"
    web, url = stack.start_web(CHATSITE_AFFINITY=affinity)
    for i in range(spec["workers"]):
        bind = {"VLLM_CPU_OMP_THREADS_BIND": str(i)} if spec["workers"] > 1 else {}
        stack.start_worker(f"{name}{i}", VLLM_CPU_KVCACHE_SPACE=2, CHATSITE_AFFINITY=affinity, **bind)

    async def go():
        async with sse_client.session(limit=0) as http:
            client = Client(url, key, http)
            warm = await client.new_chats(2)
            await asyncio.gather(*(client.turn(c, "warm up", max_tokens=8) for c in warm))
            out: dict = {}
            client.conflicts = client.post_retries = 0
            t0 = time.perf_counter()
            await asyncio.gather(*(conversation(client, i, out) for i in range(conversations)))
            return out, time.perf_counter() - t0, client.conflicts

    before = stack.live_workers()
    turns, wall, conflicts = asyncio.run(go())
    time.sleep(1.5)  # one more heartbeat carries the last figures
    after = stack.live_workers()
    stack.stop()
    ptoks = prompt_tokens(stack, [r.run_id for reqs in turns.values() for r in reqs if r.run_id])
    delta = lambda k: sum(int(after[w].get(k) or 0) - int(before.get(w, {}).get(k) or 0) for w in after)  # noqa: E731
    hits, queries = delta("prefix_cache_hits"), delta("prefix_cache_queries")
    per_turn = {t: {"ttft_p50_ms": common.ms(common.pct([r.ttft for r in reqs if r.ttft], 50)),
                    "ttft_p95_ms": common.ms(common.pct([r.ttft for r in reqs if r.ttft], 95)),
                    "prompt_tokens_mean": common.pct([ptoks[r.run_id] for r in reqs if r.run_id in ptoks], 50),
                    "errors": sum(bool(r.error) for r in reqs), "n": len(reqs)}
                for t, reqs in sorted(turns.items())}
    print(f"[multiturn] {name}: " + ", ".join(f"t{t} {report.fmt(v['ttft_p50_ms'])} ms" for t, v in per_turn.items())
          + f"; prefix hit rate {hits / queries if queries else 0:.2f}; 409s retried {conflicts}", flush=True)
    return {"turns": per_turn, "wall_s": wall, "conflicts_retried": conflicts, "prefix_cache_hits": hits, "prefix_cache_queries": queries,
            "workers": spec["workers"]}


def render(data: dict) -> str:
    arms = list(data)
    rows = []
    for t in range(1, TURNS + 1):
        row = [t, next((data[a]["turns"].get(str(t), data[a]["turns"].get(t, {})).get("prompt_tokens_mean")
                        for a in arms), None)]
        for a in arms:
            v = data[a]["turns"].get(str(t), data[a]["turns"].get(t, {}))
            row += [v.get("ttft_p50_ms"), v.get("ttft_p95_ms")]
        rows.append(row)
    head = ["turn", "prompt tokens"] + [f"{a} {q}" for a in arms for q in ("p50 ms", "p95 ms")]
    hit = ", ".join(f"{a} {data[a]['prefix_cache_hits'] / max(1, data[a]['prefix_cache_queries']):.2f}" for a in arms)
    conflicts = ", ".join(f"{a} {data[a].get('conflicts_retried', 0)}" for a in arms)
    errors = ", ".join(f"{a} {sum(v['errors'] for v in data[a]['turns'].values())}" for a in arms)
    return ("TTFT of turn N (client: first POST attempt -> first token; a 409 while the previous run is still being "
            "finalized is retried every 50 ms)\n" + report.table(head, rows)
            + f"\nprefix cache hit rate: {hit}\n409s retried: {conflicts}\nturns failed: {errors}")


def plot(data: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for a, d in data.items():
        ts = sorted(int(t) for t in d["turns"])
        ax.plot(ts, [d["turns"].get(str(t), d["turns"].get(t))["ttft_p50_ms"] for t in ts], marker="o", label=a)
    ax.set(xlabel="turn", ylabel="TTFT p50 (ms)", title="Multi-turn: time to first token of turn N")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--arms", default=",".join(ARMS))
    a = ap.parse_args()
    stack = Stack(db_name="bench_multiturn")
    key = stack.seed()
    data = {}
    try:
        for name in a.arms.split(","):
            data[name] = run_arm(stack, key, name, a.conversations)
    finally:
        stack.stop()
    common.write_json("multiturn.json", data)
    text = (f"{a.conversations} conversations "
            f"at once, {TURNS} turns, {REPLY_TOKENS}-token replies\n") + render(data)
    plot(data, common.OUT / "multiturn.png")
    (common.OUT / "multiturn.md").write_text(text + "\n")
    print(text + "\nplot: bench/out/multiturn.png")


if __name__ == "__main__":
    main()
