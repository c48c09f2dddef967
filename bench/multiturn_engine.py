"""The engine's own share of multi-turn TTFT: the same growing conversations as
bench.multiturn, straight into vLLM's AsyncLLM (no platform), with the prefix cache
on and off. Shows how much of turn N's TTFT prefix caching can save at all.

    .venv/bin/python -m bench.multiturn_engine [--conversations 8]
"""
import argparse
import asyncio
import os
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB, as every arm gets

from bench import common, report  # noqa: E402
from bench.multiturn import REPLY_TOKENS, TURNS, user_message  # noqa: E402


async def arm(caching: bool, conversations: int) -> dict:
    from transformers import AutoTokenizer
    from vllm.sampling_params import RequestOutputKind, SamplingParams
    from vllm.v1.engine.async_llm import AsyncLLM

    from inference.prompt import assemble

    tok = AutoTokenizer.from_pretrained(str(common.MODEL_DIR))
    engine = AsyncLLM.from_engine_args(common.engine_spec(enable_prefix_caching=caching).engine_args())
    params = SamplingParams(n=1, max_tokens=REPLY_TOKENS, temperature=0.0, seed=0, ignore_eos=True,
                            output_kind=RequestOutputKind.DELTA)
    ids = iter(range(10**9))
    ttft: dict[int, list[float]] = {}
    plens: dict[int, list[int]] = {}

    async def conversation(conv: int) -> None:
        history = []
        for turn in range(1, TURNS + 1):
            history.append({"role": "user", "content": user_message(conv, turn)})
            prompt = assemble(tok, history, max_prompt_tokens=common.CONTEXT_LENGTH - REPLY_TOKENS).token_ids
            start, first, text = time.perf_counter(), None, ""
            async for out in engine.generate({"prompt_token_ids": prompt}, params, f"mt-{next(ids)}"):
                if first is None and out.outputs[0].token_ids:
                    first = time.perf_counter() - start
                text += out.outputs[0].text
            ttft.setdefault(turn, []).append(first)
            plens.setdefault(turn, []).append(len(prompt))
            history.append({"role": "assistant", "content": text})

    await conversation(999)  # warm-up
    ttft.clear()
    plens.clear()
    await asyncio.gather(*(conversation(i) for i in range(conversations)))
    engine.shutdown()
    return {t: {"ttft_p50_ms": common.ms(common.pct(v, 50)), "ttft_p95_ms": common.ms(common.pct(v, 95)),
                "prompt_tokens_mean": sum(plens[t]) / len(plens[t])} for t, v in sorted(ttft.items())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=8)
    a = ap.parse_args()
    data = {"cache": asyncio.run(arm(True, a.conversations)), "nocache": asyncio.run(arm(False, a.conversations))}
    common.write_json("multiturn_engine.json", data)
    rows = [[t, data["cache"][t]["prompt_tokens_mean"], data["cache"][t]["ttft_p50_ms"], data["cache"][t]["ttft_p95_ms"],
             data["nocache"][t]["ttft_p50_ms"], data["nocache"][t]["ttft_p95_ms"]] for t in data["cache"]]
    text = (f"Engine only (AsyncLLM in process, {a.conversations} conversations at once): TTFT of turn N\n"
            + report.table(["turn", "prompt tokens", "cache p50 ms", "cache p95 ms", "nocache p50 ms",
                            "nocache p95 ms"], rows))
    (common.OUT / "multiturn_engine.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
