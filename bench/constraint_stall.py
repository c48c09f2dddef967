"""Another tenant's time to first token while one request asks for the JSON Schema
pattern that stalled a pool (issue 44 item 1), on the real engine in process (vLLM's
AsyncLLM built as a worker builds it; no HTTP, no Redis).

    .venv/bin/python -m bench.constraint_stall --admission none    # before: it reaches the engine
    .venv/bin/python -m bench.constraint_stall --admission check   # after: admission's limits first

The stalling request (max_tokens 24, the pattern `^(\\w{1,99}\\s?){1,999}$`) goes
first: with `--admission none` straight to the engine, as the platform admitted it
before its limits; with `check` through this revision's admission check
(chatsite.runs.validation.clean_response_format), and to the engine only if admitted.
Once it writes inside its string, `--others` short requests (6 tokens each, another tenant's chats)
are sent one after another; each one's time to first token and to its last token
is printed, then the stalling request is aborted.
"""
import argparse
import asyncio
import json
import os
import time

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB, as every bench arm gets

from bench import common  # noqa: E402

STALLING = {"type": "object", "properties": {"a": {"type": "string", "pattern": r"^(\w{1,99}\s?){1,999}$"}},
            "required": ["a"]}


def _asking_for_words() -> list[int]:
    """A prompt whose reply's string is a long run of word characters: the pattern's slow part (its count of
    ways to split the run into words grows with it)."""
    from transformers import AutoTokenizer

    from inference.prompt import assemble

    ask = "Answer in JSON with one field a: the first sixty digits of pi, with no spaces."
    return assemble(AutoTokenizer.from_pretrained(str(common.MODEL_DIR)), [{"role": "user", "content": ask}],
                    max_prompt_tokens=common.CONTEXT_LENGTH).token_ids


def _word_pieces() -> dict[int, float]:
    """A bias towards tokens of letters with no space before them: the reply's string becomes
    one long run of word characters, as a model writing an identifier or a number does (the
    135M demo model, left alone, writes short words that the pattern splits quickly)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(common.MODEL_DIR))
    return {i: 8.0 for piece, i in tok.get_vocab().items() if piece.isalpha() and piece.isascii() and len(piece) >= 4}


def admitted(admission: str) -> bool:
    """Whether the stalling request reaches the engine."""
    if admission == "none":
        return True
    common.django_setup()
    from chatsite.errors import InvalidInput
    from chatsite.runs.validation import clean_response_format

    try:
        clean_response_format({"type": "json_schema", "json_schema": {"name": "reply", "schema": STALLING}})
    except InvalidInput as exc:
        print(f"admission refused it: 400 {exc.field}: {exc.message}")
        return False
    return True


async def one(engine, params, prompt: list[int], request_id: str, seen: list | None = None):
    """(seconds to the first token, seconds to the last) of one request; its text so far in `seen`."""
    start, first = time.perf_counter(), None
    async for out in engine.generate({"prompt_token_ids": prompt}, params, request_id):
        if first is None and out.outputs[0].token_ids:
            first = time.perf_counter() - start
        if seen is not None:
            seen.append(out.outputs[0].text)
    return first, time.perf_counter() - start


async def main(admission: str, others: int) -> None:
    from vllm.sampling_params import RequestOutputKind, SamplingParams, StructuredOutputsParams
    from vllm.v1.engine.async_llm import AsyncLLM

    from inference.vllm_backend import shut_down

    prompts = [ids for _, ids in common.make_contents(others)] + [_asking_for_words()]
    send = admitted(admission)
    engine = AsyncLLM.from_engine_args(common.engine_spec().engine_args())
    short = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True, output_kind=RequestOutputKind.DELTA)
    await one(engine, short, prompts[0], "warm-up")
    stall, seen = None, []
    if send:
        params = SamplingParams(max_tokens=24, temperature=0.0, output_kind=RequestOutputKind.DELTA,
                                structured_outputs=StructuredOutputsParams(json=json.dumps(STALLING)),
                                logit_bias=_word_pieces())
        stall = asyncio.create_task(one(engine, params, prompts[-1], "stalling", seen))
    for _ in range(60):  # until it writes inside its string (its grammar compiled), at most a minute
        if "".join(seen).count('"') >= 3 or (stall is not None and stall.done()):
            break
        await asyncio.sleep(0.5)
    print(f"admission={admission}: the stalling request {'reached' if send else 'did not reach'} the engine")
    print("other tenant's request  ttft_s  total_s")
    for i in range(others):
        ttft, total = await one(engine, short, prompts[i], f"other-{i}")
        print(f"{i:>23}  {ttft:6.2f}  {total:7.2f}", flush=True)
    if stall is not None:
        print(f"the stalling request wrote {''.join(seen)!r} meanwhile")
        await engine.abort("stalling")
        stall.cancel()
    shut_down(engine)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--admission", choices=("none", "check"), default="check")
    parser.add_argument("--others", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.admission, args.others))
