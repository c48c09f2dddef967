"""What one run costs the platform apart from its tokens: admission (the POST), the
SSE setup, the claim, the engine hand-off and the finalize, in every process.

    .venv/bin/python -m bench.per_run [--runs 400] [--concurrency 8] [--history N] [--root DIR]
                                      [--surface rest|rest-start|rest-two-step|rest-stream|v1]
                                      [--server daphne|uvicorn] [--profile] [--tag X]

One-token runs on the fake engine (zero step time), `concurrency` clients each
posting a message and reading its events to the end, over and over; the stack's
Redis and Postgres are its own (bench/services.py), so their CPU is the platform's.
Prints CPU per run by process (web, worker, Redis, Postgres, and the client), and
with --profile writes py-spy profiles of the web and the worker under bench/out/.
`--history N` first fills the runs table with N finished runs (spread over the last
week), as a platform that has served a while has: a query whose cost grows with the
table shows here. `--root DIR` runs another checkout's code (an A/B of a change).
`--surface v1` sends each run as one streamed POST /v1/chat/completions (a new
conversation each) instead of the REST API's message POST and events GET.
`--surface rest-start` makes each run a new conversation through the REST API: the
chat and its message in one POST /api/chats/, then the events GET; `rest-two-step`
the same conversation as a chat POST, then the message POST (what a client did before
the one-request start existed, and what it still does against an older server);
`rest-stream` the one-request start with `"stream": true`: the reply in its response.
`--server uvicorn` serves the web with uvicorn (uvloop, httptools) instead of daphne.
`--tokens N --step-seconds S` makes each run N tokens, one engine step every S seconds:
with a step long enough that each token reaches the web as a frame of its own, the
difference from one-token runs, divided by N - 1, is what a token costs a stream (an A/B
of the token path, counted by --callgrind; keep --concurrency low under callgrind).
`--callgrind web` (or `worker`, or `web,worker`) runs that process under valgrind's
callgrind and prints the instructions it ran per run over the measured runs: a count
that does not move with the machine's speed, for an A/B of a change too small for CPU
seconds to show (they moved by a third between runs of one code here). The process runs
~50x slower, so its CPU figures mean nothing then; 200 runs are plenty.
"""
import argparse
import asyncio
import os
import subprocess
import time

from bench import common, report, sse_client
from bench.arm_platform import Client, OpenAIClient
from bench.platform_stack import Callgrind, Stack

HISTORY_SQL = """
with chat as (select id, tenant_id, pool_id from chats_chat where id = %(chat)s),
msgs as (insert into chats_message (chat_id, depth, role, content, token_count, tool_call_id, created_at)
         select %(chat)s, 0, 'assistant', '', 1, '', now() from generate_series(1, %(n)s) returning id)
insert into runs_generationrun (tenant_id, chat_id, user_message_id, assistant_message_id, pool_id, status, attempt,
    tier, source, sampling, seed, max_tokens, prompt_snapshot, idempotency_key, worker, queued_at, started_at,
    finished_at, prompt_tokens, completion_tokens, finish_reason, error, reserved_tokens, request_digest, raw_prompt,
    choice_index)
select chat.tenant_id, chat.id, msgs.id, msgs.id, chat.pool_id, 'completed', 1, 'interactive', 'api', '{}', 0, 1,
    '[]', '', 'history', t, t, t, 1, 1, 'length', '', 0, '', false, 0
from chat, (select id, now() - interval '7 days' * random() - interval '5 minutes' as t from msgs) msgs
"""


def fill_history(stack, n: int) -> None:
    """N finished runs of the bench pool in one chat of their own, then ANALYZE."""
    if n <= 0:
        return
    chat = stack.make_chats(1)[0]
    with stack.sql() as conn:
        conn.execute(HISTORY_SQL, {"chat": chat, "n": n})
        conn.execute("analyze")

CONTENT = "Explain how a for loop walks over a list, and what range returns."


async def drive(stack, url: str, key: str, runs: int, concurrency: int, pids: dict, profile: str = "",
                surface: str = "rest", callgrinds: dict | None = None, tokens: int = 1) -> dict:
    # rest: a message to a chat made beforehand (in SQL, not counted); rest-start: a new conversation,
    # started with its message in one POST /api/chats/; rest-two-step: a chat POST, then the message's.
    chats = stack.make_chats(runs + 4 * concurrency) if surface == "rest" else [None] * (runs + 4 * concurrency)
    todo = iter(chats)
    reqs: list[common.Request] = []
    async with sse_client.session(limit=0) as http:
        client, openai = Client(url, key, http), OpenAIClient(url, key, http)

        def turn(chat):
            if surface == "v1":
                return openai.turn(CONTENT, max_tokens=tokens)
            if surface == "rest-stream":
                return client.streamed_turn(chat, CONTENT, max_tokens=tokens)
            return client.turn(chat, CONTENT, max_tokens=tokens, two_step=surface == "rest-two-step")

        async def one_client():
            for chat in todo:
                reqs.append(await turn(chat))
                if len(reqs) >= runs:
                    return

        warm = [turn(next(todo)) for _ in range(2 * concurrency)]
        await asyncio.gather(*warm)
        spies = []
        if profile:
            spies = [subprocess.Popen([str(common.ROOT / ".venv" / "bin" / "py-spy"), "record", "-p", str(pids[name]),
                                       "-d", "15", "-r", "200", "--nonblocking", "--gil", "-f", "raw", "-o",
                                       str(common.OUT / f"profile_per_run{profile}_{name}.txt")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for name in ("web", "worker")]
        callgrinds = callgrinds or {}
        for name, cg in callgrinds.items():
            cg.zero(pids[name])
        meter = common.CpuMeter({**pids, "client": os.getpid()})
        meter.start()
        await asyncio.gather(*(one_client() for _ in range(concurrency)))
        cpu = meter.stop()
        instructions = {name: cg.instructions() for name, cg in callgrinds.items()}
        for spy in spies:
            spy.wait(60)
    ok = [r for r in reqs if not r.error]
    per_run = {k: (1000 * v / len(ok) if v is not None and ok else None) for k, v in cpu["proc_cpu_s"].items()}
    return {"runs": len(reqs), "ok": len(ok), "errors": [r.error for r in reqs if r.error][:3],
            "instructions_per_run": {name: n / len(ok) for name, n in instructions.items()} if ok else {},
            "wall_s": cpu["wall_s"], "runs_per_s": len(ok) / cpu["wall_s"], "cpu_ms_per_run": per_run,
            "platform_ms_per_run": sum(per_run.get(k) or 0 for k in ("web", "worker", "redis", "postgres")),
            "ttft_p50_ms": common.ms(common.pct([r.ttft for r in ok if r.ttft], 50)),
            "machine_busy_pct": 100 * cpu["machine_busy_s"] / (cpu["wall_s"] * os.cpu_count())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--history", type=int, default=0)
    ap.add_argument("--root", default=str(common.ROOT))
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--tag", default="")
    ap.add_argument("--surface", default="rest",
                    choices=("rest", "rest-start", "rest-two-step", "rest-stream", "v1"),
                    help="rest: POST a message to an existing chat, then GET its events (two requests); "
                         "rest-start: a new chat with its message in one POST, then the GET; rest-two-step: "
                         "POST a chat, POST the message, GET; rest-stream: a new chat with its message in one POST that "
                         "streams the reply (\"stream\": true); v1: one streamed POST /v1/chat/completions")
    ap.add_argument("--server", choices=("daphne", "uvicorn"), default="daphne", help="the web's ASGI server")
    ap.add_argument("--callgrind", default="", help="web, worker or web,worker: count their instructions per run")
    ap.add_argument("--tokens", type=int, default=1, help="tokens a run (its max_tokens, ignore_eos)")
    ap.add_argument("--step-seconds", type=float, default=0.0, help="the fake engine's time a step")
    a = ap.parse_args()
    callgrinds = {name: Callgrind(f"per_run{a.tag}_{name}") for name in filter(None, a.callgrind.split(","))}
    if set(callgrinds) - {"web", "worker"}:
        ap.error("--callgrind takes web, worker or both")
    tag = f"_{a.tag}" if a.tag else ""
    stack = Stack(db_name="bench_per_run", root=a.root)
    try:
        key = stack.seed()
        fill_history(stack, a.history)
        web, url = stack.start_web(server=a.server, wrap=callgrinds["web"].wrap if "web" in callgrinds else ())
        worker = stack.start_worker("fake", CHATSITE_ENGINE="fake", CHATSITE_FAKE_STEP_SECONDS=a.step_seconds,
                                    CHATSITE_WORKER_SLOTS=a.concurrency + 8,
                                    wrap=callgrinds["worker"].wrap if "worker" in callgrinds else ())
        pids = {"web": web.pid, "worker": worker.pid, **stack.server_pids()}
        data = asyncio.run(drive(stack, url, key, a.runs, a.concurrency, pids, tag or "_" if a.profile else "",
                                 a.surface, callgrinds, a.tokens))
    finally:
        stack.stop()
    data.update(history=a.history, root=a.root, server=a.server, surface=a.surface, tokens=a.tokens)
    common.write_json(f"per_run{tag}.json", data)
    rows = [[k, v] for k, v in data["cpu_ms_per_run"].items()]
    text = (f"{data['ok']} {a.tokens}-token runs through {a.surface} under {a.server} ({a.concurrency} clients, fake engine, "
            f"{a.history} "
            f"earlier runs in the table, code of {a.root}), {data['runs_per_s']:.0f} runs/s, "
            f"TTFT p50 {report.fmt(data['ttft_p50_ms'])} ms, machine busy {data['machine_busy_pct']:.0f}%\n"
            + report.table(["process", "CPU ms per run"], rows)
            + f"\nplatform (web + worker + redis + postgres): {data['platform_ms_per_run']:.1f} ms per run"
            + "".join(f"\n{name}: {n / 1e6:.3f} M instructions per run (callgrind; its CPU figure above is valgrind's)"
                      for name, n in data["instructions_per_run"].items())
            + (f"\nerrors: {data['errors']}" if data["errors"] else ""))
    (common.OUT / f"per_run{tag}.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
