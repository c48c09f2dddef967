"""A conversation past the model's room (issue 43 §2): what does each turn's prompt cost the
worker's tokenizer, and how much of it could the engine's prefix cache serve?

SmolLM2's tokenizer and chat template (and with --engine, vLLM), a conversation of ~150-token questions and
~60-token replies (its reply ids the tokenizer's own) growing from 5k to ~13k tokens past a
room of 8,192 - 512 (the product pool's context less a reply's room). Each turn's prompt is
built as the worker builds it (in the product, admission's snapshot picks the start by the
same rule first: chatsite.runs.admission.write.snapshot), two ways:
- before: just enough of the oldest turns dropped (refill 1.0); the last reply's record
  spells the whole history, so no turn past the room starts from it;
- after: down to inference.prompt.REFILL of the room, and the next turns start with the last
  reply's record, its dropped turns left out (inference.token_prefix.extend).
Per turn: the building's CPU (this thread's, the record's making included) and the prompt's
share a prefix cache could serve: its leading ids equal to the ids the engine held at the
last reply's end, in whole 16-token blocks; with --engine, each arm's prompts sent to vLLM in
turn (one token a reply): the TTFT and the prompt tokens its prefix cache served. Prints
medians over the turns past the room and writes bench/out/past_context.png.

    .venv/bin/python -m bench.probes.past_context [--turns 60] [--engine]
"""
import argparse
import asyncio
import statistics
import time

from bench import common

MODEL = common.ROOT / "var" / "models" / "smollm2-135m-instruct"
ROOM = 8192 - 512
BLOCK = 16
PNG = common.ROOT / "bench" / "out" / "past_context.png"


def _words(turn: int, n: int) -> str:
    return " ".join(common._FILLER[(turn * 7 + i) % len(common._FILLER)] for i in range(n))


def walk(tok, arm: str, turns: int) -> list[dict]:
    from inference import token_prefix
    from inference.prompt import assemble

    salt = token_prefix.salt(tok, None)
    messages = [{"role": "system", "content": f"You are a terse assistant ({arm})."}]  # no cache shared by the arms
    while len(assemble(tok, messages + [{"role": "user", "content": "?"}], max_prompt_tokens=10 ** 6).token_ids) < 5000:
        messages += [{"role": "user", "content": _words(len(messages), 110)},
                     {"role": "assistant", "content": _words(len(messages), 45)}]
    known, out = None, []
    for turn in range(turns):
        messages.append({"role": "user", "content": f"[{turn}] " + _words(turn, 110)})
        started = time.thread_time()
        plan = None
        if known is not None:
            plan = token_prefix.extend(tok, messages, known, max_prompt_tokens=ROOM, salt=salt)
        if plan is None:
            plan = assemble(tok, messages, max_prompt_tokens=ROOM, **({"refill": 1.0} if arm == "before" else {}))
        reply = _words(turn + 3, 45)
        output = tok.encode(reply, add_special_tokens=False) + [tok.eos_token_id]
        record = token_prefix.record(tok, prompt_ids=plan.token_ids, prompt_text=plan.text, output_ids=output,
                                     salt=salt, dropped=plan.num_messages_dropped if arm == "after" else 0)
        cpu_ms = (time.thread_time() - started) * 1000
        held = known.token_ids if known is not None else []
        same = next((i for i, (a, b) in enumerate(zip(plan.token_ids, held)) if a != b),
                    min(len(held), len(plan.token_ids)))
        history = len(assemble(tok, messages, max_prompt_tokens=10 ** 6, refill=1.0).token_ids)
        out.append({"history": history, "prompt": len(plan.token_ids), "dropped": plan.num_messages_dropped,
                    "cpu_ms": cpu_ms, "cached": (same // BLOCK * BLOCK) / len(plan.token_ids),
                    "from_ids": plan.from_ids > 0, "ids": plan.token_ids})
        known = record
        messages.append({"role": "assistant", "content": reply})
    return out


async def _ttft(arms: dict) -> None:
    """Each arm's prompts, turn by turn, through vLLM (its prefix cache warm from the turns before)."""
    from bench.token_history import Engine

    engine = Engine(reply_tokens=1)
    for arm, rows in arms.items():
        for row in rows:
            _, ttft, cached = await engine.generate(row["ids"])
            row["ttft_ms"], row["engine_cached"] = ttft * 1000, cached
        past = [r for r in rows if r["history"] > ROOM]
        ttft = sorted(r["ttft_ms"] for r in past)
        print(f"{arm}: TTFT a turn past the room p50 {statistics.median(ttft):.0f} ms, p90 "
              f"{ttft[int(len(ttft) * 0.9)]:.0f} ms; prompt tokens served from vLLM's cache "
              f"{sum(r['engine_cached'] for r in past) / sum(r['prompt'] for r in past):.3f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=60)
    ap.add_argument("--engine", action="store_true",
                    help="also send each turn's prompt to vLLM (SmolLM2, the flagship pool's arguments; one token a "
                         "reply, so its cache holds the prompts): TTFT a turn past the room, both arms in turn")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    from inference.prompt import REFILL

    tok = AutoTokenizer.from_pretrained(str(MODEL))
    arms = {arm: walk(tok, arm, args.turns) for arm in ("before", "after")}
    print(f"past a room of {ROOM} tokens, SmolLM2's tokenizer, REFILL {REFILL} (turns whose history no longer fits)")
    print("| arm | turns past the room | tokenizer CPU a turn p50 / p90 (ms) | prompt share a prefix cache serves "
          "p50 / mean | turns from the record's ids | cold starts |")
    print("|---|---|---|---|---|---|")
    for arm, rows in arms.items():
        past = [r for r in rows if r["history"] > ROOM]
        cpu = sorted(r["cpu_ms"] for r in past)
        cold = sum(1 for a, b in zip(rows, rows[1:]) if b["history"] > ROOM and b["dropped"] != a["dropped"])
        cached = [r["cached"] for r in past]
        print(f"| {arm} | {len(past)} | {statistics.median(cpu):.1f} / {cpu[int(len(cpu) * 0.9)]:.1f} | "
              f"{statistics.median(cached):.3f} / {statistics.mean(cached):.3f} | "
              f"{sum(r['from_ids'] for r in past)} | {cold} |")
    if args.engine:
        asyncio.run(_ttft(arms))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for arm, rows in arms.items():
        a.plot([r["history"] for r in rows], [r["cpu_ms"] for r in rows], marker=".", label=arm)
        b.plot([r["history"] for r in rows], [r["cached"] for r in rows], marker=".", label=arm)
    for ax, label in ((a, "tokenizer CPU a turn (ms)"), (b, "prompt share a prefix cache serves")):
        ax.axvline(ROOM, color="grey", linestyle=":")
        ax.set_xlabel("history (tokens)")
        ax.set_ylabel(label)
        ax.legend()
    fig.suptitle(f"A conversation past its room ({ROOM} tokens): before and after REFILL {REFILL} + the record's drops")
    fig.tight_layout()
    fig.savefig(PNG, dpi=90)
    print(f"wrote {PNG.relative_to(common.ROOT)}")


if __name__ == "__main__":
    main()
