"""Send now (issue 43 section 1): from a queued message's "send now" to the first token of
the run it steers to, against the warm-prefix TTFT of a plain message in the same chat.

One worker, real daphne and Celery on a Postgres and Redis of their own. Per round, in a
chat of its own warmed by one short turn (--one-chat: one chat for every round, which
outgrows a small model's context): a long reply streams; a message is queued (`"queue": true`); once the reply has
some tokens, POST .../send-now at t0. Stamps come from Redis stream entry ids (Redis's
clock, milliseconds, the same machine as the client): the stopped reply's terminal
entry (the stop), and the steered run's first token entry. Then, in the same chat, a
plain message is sent (its prefix is as warm: the same chat, one turn later) and its
first token stamped the same way: the target is steer <= that TTFT + one engine step.

    .venv/bin/python -m bench.steer [--engine fake|vllm] [--model tiny|product] [--rounds 10] [--stages]
        [--jitter-ms 25] [--one-chat]

With --stages the web and the worker mark each stage (chatsite/stage_trace.py) and a second
table splits send now -> the steered first token between them (bench/probes/steer_stages.py).
"""
import argparse
import os
import random
import socket
import statistics
import tempfile
import time
from datetime import date
from pathlib import Path

import httpx

from bench import common, report
from bench.probes import steer_stages
from bench.platform_stack import Stack
from chatsite import redis_keys  # key names only; no Django

FAKE_STEP_SECONDS = 0.025  # 40 tokens a second, about vLLM's CPU build on the demo model
OUT_MD = common.ROOT / "bench/out/steer.md"
STAGES_MD = common.ROOT / "bench/out/steer_stages.md"


def _ms(entry_id: str) -> float:
    return int(entry_id.split("-")[0]) / 1000


def first_token_at(r, run_id: int, timeout: float = 60) -> float:
    """Wall time (Redis's clock) of the run's first token entry."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for entry_id, fields in r.xrange(redis_keys.run_stream(run_id), count=4):
            if "t" in fields or "p" in fields:
                return _ms(entry_id)
        time.sleep(0.001)
    raise TimeoutError(f"run {run_id}: no token after {timeout} s")


def ended_at(r, run_id: int, timeout: float = 60) -> float:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        last = r.xrevrange(redis_keys.run_stream(run_id), count=1)
        if last and ("d" in last[0][1] or "e" in last[0][1]):
            return _ms(last[0][0])
        time.sleep(0.001)
    raise TimeoutError(f"run {run_id} did not end")


def run_of_queued(stack: Stack, queued_id: int, timeout: float = 60) -> int:
    end = time.monotonic() + timeout
    with stack.sql() as conn:
        while time.monotonic() < end:
            row = conn.execute("select run_id from chats_queuedmessage where id = %s", (queued_id,)).fetchone()
            if row and row[0]:
                return row[0]
            time.sleep(0.001)
    raise TimeoutError(f"queued message {queued_id} did not start")


def wait_idle(stack: Stack, chat_id: int) -> None:
    with stack.sql() as conn:
        while conn.execute("select 1 from runs_generationrun where chat_id = %s and status in ('queued', 'running')",
                           (chat_id,)).fetchone():
            time.sleep(0.02)


def warm_chat(stack: Stack, http: httpx.Client) -> int:
    """A new chat with one short turn: its prefix is on the worker."""
    chat_id = stack.make_chats(1)[0]
    http.post(f"/api/chats/{chat_id}/messages/", json={"content": "Hello.", "max_tokens": 8})
    wait_idle(stack, chat_id)
    return chat_id


def one_round(stack: Stack, http: httpx.Client, chat_id: int, long_tokens: int, after_tokens: int,
              delay: float = 0.0) -> dict:
    r = stack.redis()
    url = f"/api/chats/{chat_id}/messages/"
    long_run = http.post(url, json={"content": "Tell me a long story about loops.", "max_tokens": long_tokens,
                                    "ignore_eos": True}).json()["run"]
    queued = http.post(url, json={"content": "Stop: what is a for loop?", "queue": True, "max_tokens": 16})
    queued_id = queued.json()["queued_message"]["id"]
    key = redis_keys.run_stream(long_run["id"])
    while sum(1 for _, f in r.xrange(key) if "t" in f) < after_tokens:
        time.sleep(0.005)
    time.sleep(delay)  # where in the engine's step the click falls (--jitter-ms)
    t0 = time.time()
    assert http.post(f"/api/chats/{chat_id}/queue/{queued_id}/send-now").status_code == 202
    answered = time.time()
    stopped = ended_at(r, long_run["id"])
    asked = r.zscore(redis_keys.cancelled_runs(), str(long_run["id"]))  # when send-now asked the stop (web clock)
    steered = run_of_queued(stack, queued_id)
    with stack.sql() as conn:  # the engine's step as the stopped reply saw it (vLLM's target)
        itl = conn.execute("select itl_ms from runs_generationrun where id = %s", (long_run["id"],)).fetchone()[0]
    steer_first = first_token_at(r, steered)
    wait_idle(stack, chat_id)
    t1 = time.time()  # the plain message, as warm
    plain = http.post(url, json={"content": "And a while loop?", "max_tokens": 16}).json()["run"]
    plain_first = first_token_at(r, plain["id"])
    wait_idle(stack, chat_id)
    return {"steer_ms": (steer_first - t0) * 1000, "answer_ms": (answered - t0) * 1000,
            "stop_ms": (stopped - t0) * 1000, "asked_to_stop_ms": (stopped - asked) * 1000,
            "restart_ms": (steer_first - stopped) * 1000,
            "plain_ttft_ms": (plain_first - t1) * 1000, "itl_ms": itl or 0.0,
            "ids": {"stopped": long_run["id"], "steered": steered, "t0": t0, "first_token_at": steer_first,
                    "plain": (plain["id"], t1, plain_first)}}


def summary(rows: list[dict], name: str) -> tuple[float, float]:
    values = sorted(row[name] for row in rows)
    return statistics.median(values), values[min(len(values) - 1, int(len(values) * 0.9))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", choices=["fake", "vllm"], default="fake")
    ap.add_argument("--model", choices=["tiny", "product"], default="tiny",
                    help="vLLM's model: the tiny trained one the benches share, or the product's default "
                         "(SmolLM2-135M-Instruct)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--long-tokens", type=int, default=400)
    ap.add_argument("--after-tokens", type=int, default=10, help="tokens of the long reply before send now")
    ap.add_argument("--one-chat", action="store_true",
                    help="every round in one chat, its history growing (~70 tokens a round): past the model's context "
                         "less the long reply's room (the tiny model: 1,024 - 400), the long reply's prompt drops more "
                         "turns than the steered one's, whose prefix is then cold. By default each round has a chat "
                         "of its own, warmed by one short turn")
    ap.add_argument("--stages", action="store_true", help="mark each stage in the web and the worker")
    ap.add_argument("--jitter-ms", type=float, default=0.0,
                    help="send now after a further random 0..N ms (the same draws in every run): without it the "
                         "click follows a token entry, always at the same point of the engine's step")
    args = ap.parse_args()
    draws = random.Random(43)
    trace = Path(tempfile.mkdtemp()) / "stages.txt"
    if args.stages:
        os.environ["CHATSITE_STAGE_TRACE"] = str(trace)  # the stack's processes inherit it
    env = {"CHATSITE_ENGINE": "fake", "CHATSITE_FAKE_STEP_SECONDS": str(FAKE_STEP_SECONDS)} \
        if args.engine == "fake" else {}
    stack = Stack(db_name="bench_steer", **env)
    try:
        secret = stack.seed(product_model=args.engine == "vllm" and args.model == "product")
        _, base = stack.start_web()
        stack.start_worker("steer")
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"}, timeout=60) as http:
            rows, chat_id = [], None
            for i in range(args.rounds):
                if chat_id is None or not args.one_chat:
                    chat_id = warm_chat(stack, http)
                rows.append(one_round(stack, http, chat_id, args.long_tokens, args.after_tokens,
                                      delay=draws.uniform(0, args.jitter_ms) / 1000))
                print(f"round {i + 1}: " + ", ".join(f"{k} {v:.0f}" for k, v in rows[-1].items() if k != "ids"),
                      flush=True)
    finally:
        stack.stop()
    # One engine step: the fake's pace, or vLLM's as its stopped replies streamed (their median gap).
    step_ms = FAKE_STEP_SECONDS * 1000 if args.engine == "fake" else summary(rows, "itl_ms")[0]
    names = ["answer_ms", "stop_ms", "asked_to_stop_ms", "restart_ms", "steer_ms", "plain_ttft_ms", "itl_ms"]
    table = report.table(["figure", "median (ms)", "p90 (ms)"],
                         [[n, *(f"{v:.0f}" for v in summary(rows, n))] for n in names])
    steer, plain = summary(rows, "steer_ms")[0], summary(rows, "plain_ttft_ms")[0]
    budget = plain + step_ms
    verdict = (f"steer median {steer:.0f} ms against warm TTFT {plain:.0f} ms + one step {step_ms:.0f} ms "
               f"= {budget:.0f} ms: {'met' if steer <= budget else 'missed'}")
    command = f".venv/bin/python -m bench.steer --engine {args.engine} --rounds {args.rounds}" \
        + (f" --model {args.model}" if args.engine == "vllm" else "") \
        + (" --one-chat" if args.one_chat else "") + (" --stages" if args.stages else "") + (f" --jitter-ms {args.jitter_ms:g}" if args.jitter_ms else "")
    stamp = (f"`{command}` ({date.today().isoformat()}, load {common.loadavg():.1f} on {socket.gethostname()}; "
             f"engine {args.engine}" + (f" ({args.model} model)" if args.engine == "vllm" else "")
             + f", {step_ms:.0f} ms a step)\n\n")
    print(table)
    print(verdict)
    if args.stages:  # the marks cost a little: these rounds' figures are not steer.md's
        stages = steer_stages.table(trace, [row["ids"] for row in rows])
        plain = steer_stages.table(trace, [row["ids"] for row in rows], plain=True)
        print("\nSend now -> the steered run's first token, stage by stage (chatsite/stage_trace.py)")
        print(stages)
        print("\nThe plain message -> its first token (the target's warm TTFT), stage by stage")
        print(plain)
        STAGES_MD.write_text(
            "# Send now, stage by stage (issue 43 section 1)\n\n" + stamp + steer_stages.__doc__.split("\n\n")[1]
            + "\n\n```\n" + stages + "\n```\n\nThe plain message, the same stages from its POST:\n\n```\n"
            + plain + "\n```\n\n" + table + f"\n\n{verdict}\n")
        return
    OUT_MD.write_text(
        "# Send now: to the steered run's first token (issue 43 section 1)\n\n" + stamp +
        "From POST .../send-now (t0): *answer_ms* its 202; *stop_ms* the stopped reply's terminal entry "
        "(*asked_to_stop_ms*: from the stop's ask in Redis, the worker's part); "
        "*restart_ms* from that to the steered run's first token entry; *steer_ms* t0 to that first token; "
        "*plain_ttft_ms* a plain message's post to its first token in the same chat right after (warm prefix); "
        "*itl_ms* the stopped reply's time between tokens (vLLM's step). "
        "Stamps: Redis stream entry ids.\n\n" + table + f"\n\n{verdict}\n")

if __name__ == "__main__":
    main()
