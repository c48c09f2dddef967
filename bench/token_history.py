"""Conversation memory as exact tokens (issue 43 §2), before and after, on the real engine
(SmolLM2-135M-Instruct, context 8192, vLLM's AsyncLLM with the flagship pool's pinned
arguments, no platform around it).

One conversation per arm grows from ~2k to ~8k tokens of history (long questions, short
greedy replies). Each turn's prompt is built as the worker builds it:
- before: the whole history rendered and tokenized again (inference.prompt.assemble);
- after: the ids the engine held at the last reply's end (its prompt and the ids it
  generated: inference.token_prefix.record) and the ids of the new part only
  (inference.token_prefix.extend).
Per turn it measures the prompt building's CPU (this thread's, with the record's making
for `after`), the prompt tokens served by vLLM's prefix cache against the prefix this turn
shares with what the engine computed before, and the TTFT. At ~4k and 7k it also
sends a short question after the reply (its TTFT: what a user sees at that much history;
a turn's own TTFT is mostly its long question's prefill), a regenerate (the same question
again) and an edit (another question after the same history). Before all that, the prompt building's CPU alone over a conversation of many
short turns (no engine, median of repeats). Prints the figures, writes bench/out/token_history.json and a PNG plot.

    .venv/bin/python -m bench.token_history [--question-words 1800] [--reply-tokens 16] [--arms after,before]
"""
import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB: 8k tokens of SmolLM2 take ~0.2

from bench import common  # noqa: E402

MODEL = common.ROOT / "var" / "models" / "smollm2-135m-instruct"
CONTEXT = 8192
CHECKPOINTS = (3840, 7168)  # history lengths (~4k, ~8k with the default question) where the probes are sent
_TOPICS = ("loops", "lists", "dictionaries", "classes", "exceptions", "generators", "decorators", "modules",
           "files", "tests", "threads", "sockets", "strings", "numbers", "sets", "tuples", "iterators", "closures",
           "typing", "async", "packaging", "logging", "regular expressions", "dates", "paths", "json")


def question(arm: str, turn: int, words: int, variant: str = "") -> str:
    """A long question, distinct per arm, turn and variant (no cache shared between arms)."""
    topic = _TOPICS[turn % len(_TOPICS)]
    filler = " ".join(common._FILLER[i % len(common._FILLER)] for i in range(words))
    return f"[{arm} {turn}{variant}] Tell me about Python {topic}, in one sentence. Context: {filler}"


class Engine:
    """AsyncLLM with one call: generate greedily, report (output ids, ttft s, cached prompt tokens)."""

    def __init__(self, reply_tokens: int):
        from vllm.sampling_params import RequestOutputKind, SamplingParams
        from vllm.v1.engine.async_llm import AsyncLLM

        from inference.engine_config import DEMO_POOL_ENGINE_ARGS
        from inference.specs import EngineSpec

        spec = EngineSpec.build(pool="flagship", model=str(MODEL), context_length=CONTEXT,
                                engine_args=dict(DEMO_POOL_ENGINE_ARGS["flagship"]))
        self.llm = AsyncLLM.from_engine_args(spec.engine_args())
        from inference.cpu_affinity import colocate_engine_core

        colocate_engine_core()  # the engine core's spin on its model worker's cores, as a worker does
        self.params = SamplingParams(n=1, max_tokens=reply_tokens, temperature=0.0, seed=0,
                                     output_kind=RequestOutputKind.DELTA)
        self.n = 0

    async def generate(self, ids: list[int]) -> tuple[list[int], float, int]:
        self.n += 1
        start, ttft, out, cached = time.perf_counter(), None, [], 0
        async for o in self.llm.generate({"prompt_token_ids": ids}, self.params, f"th-{self.n}"):
            if ttft is None and o.outputs[0].token_ids:
                ttft = time.perf_counter() - start
            out.extend(o.outputs[0].token_ids)
            if o.finished:
                cached = o.num_cached_tokens or 0
        return out, ttft or 0.0, cached


class Conversation:
    """One arm's conversation: its messages and the record of its last reply."""

    def __init__(self, tok, arm: str):
        from inference import token_prefix

        self.tok, self.arm, self.tp = tok, arm, token_prefix
        self.salt = token_prefix.salt(tok, None)
        self.messages = [{"role": "system", "content": f"You are a terse assistant ({arm})."}]
        self.known = None  # the record of the last reply (prompt ids + generated ids)

    def prompt(self, messages: list[dict], room: int = CONTEXT - 64):
        """(the plan, this thread's CPU seconds building it)."""
        from inference.prompt import assemble

        started = time.thread_time()
        plan = None
        if self.arm == "after" and self.known is not None:
            plan = self.tp.extend(self.tok, messages, self.known, max_prompt_tokens=room, salt=self.salt)
        if plan is None:
            plan = assemble(self.tok, messages, max_prompt_tokens=room)
        return plan, time.thread_time() - started

    def remember(self, plan, output: list[int]) -> float:
        """Keep the reply's record (the `after` arm's cost, counted with its turn)."""
        started = time.thread_time()
        record = self.tp.record(self.tok, prompt_ids=plan.token_ids, prompt_text=plan.text, output_ids=output,
                                salt=self.salt)
        self.known = record
        return time.thread_time() - started if self.arm == "after" else 0.0


def cpu_curve(tok, question_words: int, repeats: int) -> dict:
    """The prompt building's CPU per turn with no engine (a canned reply of ~30 tokens), the
    median of `repeats` builds per turn, both arms over the same conversation: a curve
    with many points and little noise (the engine's turns give few)."""
    from inference.prompt import assemble

    reply = "A loop walks over the items of a list one at a time, and the body runs once for each item."
    out = {"before": [], "after": []}
    conv = Conversation(tok, "after")
    for turn in range(200):
        messages = conv.messages + [{"role": "user", "content": question("cpu", turn, question_words)}]
        full = assemble(tok, messages, max_prompt_tokens=CONTEXT - 64)
        if full.num_messages_dropped:  # the history no longer fits whole: the curve ends
            break
        times = {"before": [], "after": []}
        for _ in range(repeats):
            started = time.thread_time()
            assemble(tok, messages, max_prompt_tokens=CONTEXT)
            times["before"].append(time.thread_time() - started)
            keep = conv.known
            plan, cpu = conv.prompt(messages)
            cpu += conv.remember(plan, tok.encode(reply, add_special_tokens=False) + [tok.eos_token_id])
            times["after"].append(cpu)
            conv.known = keep
        conv.remember(plan, tok.encode(reply, add_special_tokens=False) + [tok.eos_token_id])
        conv.messages = messages + [{"role": "assistant", "content": reply}]
        for name in out:
            out[name].append({"prompt_tokens": len(full.token_ids),
                              "cpu_ms": sorted(times[name])[repeats // 2] * 1000})
    return out


def _text(tok, output: list[int]) -> str:
    return tok.decode(output, skip_special_tokens=True)


async def arm(engine: Engine, tok, name: str, question_words: int, reply_tokens: int, save) -> dict:
    conv = Conversation(tok, name)
    turns, probes, turn = [], [], 0
    save(name, {"turns": turns, "probes": probes})  # as it goes: a run cut short keeps what it measured
    checkpoints = list(CHECKPOINTS)
    while True:
        messages = conv.messages + [{"role": "user", "content": question(name, turn, question_words)}]
        plan, cpu = conv.prompt(messages, room=CONTEXT - reply_tokens)
        if plan.num_messages_dropped:  # the history no longer fits whole: the conversation ends
            break
        shared = len(conv.known.token_ids) if conv.known else 0  # what the engine computed of this prompt
        before_known = conv.known
        output, ttft, cached = await engine.generate(plan.token_ids)
        cpu += conv.remember(plan, output)
        turns.append({"turn": turn, "prompt_tokens": len(plan.token_ids), "shared": shared, "cached": cached,
                      "cpu_ms": cpu * 1000, "ttft_ms": ttft * 1000, "from_ids": plan.from_ids})
        print(f"# {name} turn {turn}: {turns[-1]}", file=sys.stderr, flush=True)
        save(name, {"turns": turns, "probes": probes})
        conv.messages = messages + [{"role": "assistant", "content": _text(tok, output)}]
        if checkpoints and len(plan.token_ids) >= checkpoints[0] and before_known is not None:
            checkpoints.pop(0)
            probes.append(await _probe(engine, conv, before_known, messages, plan, name, turn, question_words))
            print(f"# {name} probe: {probes[-1]}", file=sys.stderr, flush=True)
            save(name, {"turns": turns, "probes": probes})
        turn += 1
    return {"turns": turns, "probes": probes}


async def _probe(engine, conv, known, messages, plan, name, turn, question_words) -> dict:
    """A regenerate (the turn's question again) and an edit (another question in its place),
    both after the same history: the cached share of what they share with the engine's cache.
    Then a short question after the turn's reply (not kept): the TTFT a user sees at this
    much history, where a turn's own long question's prefill does not hide it."""
    followup = conv.messages + [{"role": "user", "content": f"[{name} {turn}] Say that again in five words."}]
    short, _ = conv.prompt(followup)
    _, short_ttft, short_cached = await engine.generate(short.token_ids)
    last_known, conv.known = conv.known, known
    regen, _ = conv.prompt(messages)
    _, _, regen_cached = await engine.generate(regen.token_ids)
    edited = messages[:-1] + [{"role": "user", "content": question(name, turn, question_words, "-edited")}]
    edit, _ = conv.prompt(edited)
    _, _, edit_cached = await engine.generate(edit.token_ids)
    conv.known = last_known
    shared_regen = len(plan.token_ids)  # the whole prompt was computed for the turn
    shared_edit = len(known.token_ids)  # the history up to the last reply's end
    # (a cache hit past the shared prefix, the next message's template header, counts as no more than it)
    return {"history": len(plan.token_ids), "regenerate": min(regen_cached, shared_regen) / shared_regen,
            "edit": min(edit_cached, shared_edit) / shared_edit, "regenerate_cached": regen_cached, "edit_cached": edit_cached,
            "regenerate_shared": shared_regen, "edit_shared": shared_edit,
            "short_history": len(short.token_ids), "short_cached": short_cached, "short_ttft_ms": short_ttft * 1000}


def summary(result: dict) -> dict:
    turns = [t for t in result["turns"] if t["shared"]]

    def near(tokens: int) -> dict:
        return min(result["turns"], key=lambda t: abs(t["prompt_tokens"] - tokens))

    return {
        "cpu_ms_at": {k: round(near(k)["cpu_ms"], 2) for k in (1024, 2048, 4096, 8192)},
        "ttft_ms_at": {k: round(near(k)["ttft_ms"]) for k in (4096, 8192)},
        "ttft_history_at": {k: near(k)["prompt_tokens"] for k in (4096, 8192)},
        # a short question after that much history (the probes'): the TTFT a user sees
        "short_ttft_ms_at": {p["short_history"]: round(p["short_ttft_ms"]) for p in result["probes"]},
        "multi_turn_cached_min": round(min(min(t["cached"], t["shared"]) / t["shared"] for t in turns), 3),
        "multi_turn_cached_mean": round(sum(min(t["cached"], t["shared"]) / t["shared"] for t in turns)
                                        / len(turns), 3),
        "regenerate_cached": [round(p["regenerate"], 3) for p in result["probes"]],
        "edit_cached": [round(p["edit"], 3) for p in result["probes"]],
    }


def plot(curve: dict, results: dict, path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not in the venv: no plot"
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for name, points in curve.items():
        axes[0].plot([p["prompt_tokens"] for p in points], [p["cpu_ms"] for p in points], ".-", label=name)
    for name, result in results.items():
        turns = result["turns"]
        x = [t["prompt_tokens"] for t in turns]
        shared = [t for t in turns if t["shared"]]
        axes[1].plot([t["prompt_tokens"] for t in shared],
                     [min(t["cached"], t["shared"]) / t["shared"] for t in shared], "o-", label=f"{name}: next turn")
        axes[1].plot([p["history"] for p in result["probes"]], [p["edit"] for p in result["probes"]], "s--",
                     label=f"{name}: edit")
        axes[2].plot(x, [t["ttft_ms"] for t in turns], "o-", label=f"{name}: the turn (its long question)")
        axes[2].plot([p["short_history"] for p in result["probes"]], [p["short_ttft_ms"] for p in result["probes"]],
                     "s--", label=f"{name}: a short question")
    axes[0].set(title="prompt building CPU per turn (median of repeats)", xlabel="prompt tokens (history)",
                ylabel="ms (thread CPU)")
    axes[1].set(title="prefix cache: cached / shared prefix", xlabel="prompt tokens (history)", ylim=(0, 1.05))
    axes[2].set(title="TTFT per turn", xlabel="prompt tokens (history)", ylabel="ms", yscale="log")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return str(path)


async def main_async(a, tok, save) -> dict:
    engine = Engine(a.reply_tokens)
    await engine.generate(tok.encode("warm up"))
    results = {}
    for name in a.arms.split(","):
        await engine.llm.reset_prefix_cache()
        results[name] = await arm(engine, tok, name, a.question_words, a.reply_tokens,
                                  lambda arm_name, r: save(arm_name, r))
    engine.llm.shutdown()
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--question-words", type=int, default=1800)
    ap.add_argument("--arms", default="after,before", help="which arms, in this order")
    ap.add_argument("--reply-tokens", type=int, default=16)
    ap.add_argument("--out", default=str(common.OUT / "token_history"))
    ap.add_argument("--cpu-question-words", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(MODEL))
    curve = cpu_curve(tok, a.cpu_question_words, a.repeats)
    print("prompt building CPU per turn, ms (median of %d): history before after" % a.repeats)
    for b, f in zip(curve["before"], curve["after"]):
        print(f"  {b['prompt_tokens']:6} {b['cpu_ms']:7.2f} {f['cpu_ms']:7.2f}")
    sys.stdout.flush()
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial: dict = {}

    def save(name: str, result: dict) -> None:
        partial[name] = result
        out.with_suffix(".json").write_text(json.dumps({"partial": True, "cpu_curve": curve, "runs": partial}))

    results = asyncio.run(main_async(a, tok, save))
    figures = {name: summary(r) for name, r in results.items()}
    for name in figures:
        figures[name]["cpu_curve_ms_at"] = {k: round(min(curve[name], key=lambda p: abs(p["prompt_tokens"] - k))
                                                     ["cpu_ms"], 2) for k in (1024, 2048, 4096, 8192)}
    out.with_suffix(".json").write_text(json.dumps({"figures": figures, "cpu_curve": curve, "runs": results},
                                                   indent=1))
    print(f"{'arm':8} {'turn':>4} {'prompt':>6} {'shared':>6} {'cached':>6} {'cpu ms':>7} {'ttft ms':>8}")
    for name, r in results.items():
        for t in r["turns"]:
            print(f"{name:8} {t['turn']:4} {t['prompt_tokens']:6} {t['shared']:6} {t['cached']:6} "
                  f"{t['cpu_ms']:7.2f} {t['ttft_ms']:8.0f}")
    for name, r in results.items():
        for p in r["probes"]:
            print(f"{name:8} probe at {p['history']:5}: regenerate {p['regenerate_cached']}/{p['regenerate_shared']}"
                  f" = {p['regenerate']:.3f}, edit {p['edit_cached']}/{p['edit_shared']} = {p['edit']:.3f}, "
                  f"a short question's TTFT {p['short_ttft_ms']:.0f} ms")
    print(json.dumps(figures, indent=1))
    print("plot:", plot(curve, results, out.with_suffix(".png")))


if __name__ == "__main__":
    main()
