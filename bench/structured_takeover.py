"""A constrained reply survives its worker, on the real engine (issue 43 §3): N trials
each of a JSON Schema reply and a `tool_choice: required` call, streamed from
/v1/chat/completions, the worker writing it SIGKILLed or paused (SIGSTOP, its whole
process group: the engine with it) past its lease at a random token of the reply; another
worker takes the run up, its grammar advanced over the reply so far
(inference.carried_grammar). A trial passes when the saved reply is valid JSON of its
schema and equal to what the client streamed. Per shape and fault: trials, passes, the
tokens at the fault, and the client's longest wait between two chunks; with --baseline,
how many uncut replies of the same requests are valid. The shapes are
bench.structured_shapes.CITY's (one call: `parallel_tool_calls: false`); the demo pools
write compact JSON (inference.engine_config.COMPACT_JSON: left free, the small model
padded a value with whitespace to max_tokens, 8 of 40 trials of the first run).

Real daphne, three Celery workers of the demo flagship pool (SmolLM2-135M-Instruct on
vLLM's CPU build, temperature 0.7) and beat sweeping every second, on a fresh database and
Redis db of the machine's servers; the lease is 4 s as in the tests. A killed worker is
started again in the background while the other two go on. ~15-30 min on 2 busy cores.

    .venv/bin/python -m bench.structured_takeover [--trials 20] [--kills 3] [--baseline 0] [--tag ""]
"""
import argparse
import json
import os
import random
import signal
import statistics
import threading
import time
from datetime import date

import httpx
from bench import common
from bench.platform_stack import Proc, Stack
from bench.structured_shapes import CITY, SHAPES, client_text, same
from chatsite import redis_keys  # key names only; no Django

OUT_MD = common.ROOT / "bench/out/structured_takeover.md"
WORKERS = ("ta", "tb", "tc")
PAUSE_LIMIT_SECONDS = 60
MAX_TOKENS = 200


def tokens_streamed(r, run_id: int) -> int:
    """Tokens the run's stream holds (entries `t`/`p` = "SEQ N ATTEMPT ...")."""
    best = 0
    for _, fields in r.xrange(redis_keys.run_stream(run_id)):
        value = fields.get("t") or fields.get("p")
        if value:
            seq, n = value.split(" ", 2)[:2]
            best = max(best, int(seq) + int(n))
    return best


def run_row(stack: Stack, run_id: int) -> tuple:
    with stack.sql() as conn:
        return conn.execute("select r.status, r.attempt, r.worker, r.error, m.content, r.completion_tokens, "
                            "r.finish_reason from runs_generationrun r join "
                            "chats_message m on m.id = r.assistant_message_id where r.id = %s", (run_id,)).fetchone()


class Workers:
    """Three vLLM workers; a killed one is started again in the background."""

    def __init__(self, stack: Stack, names=WORKERS):
        self.stack = stack
        self.procs: dict[str, Proc] = {}
        self.ready: set[str] = set()
        self.lock = threading.Lock()
        for name in names:
            self.procs[name] = self._launch(name)
        for name in names:
            self.stack.wait_worker(name, self.procs[name], 1200)
            self.ready.add(name)

    def _launch(self, name: str) -> Proc:
        return self.stack._start(f"worker-{name}", ["-m", "celery", "-A", "chatsite", "worker", "--model-pool",
                                                    common.POOL, "-n", f"{name}@%h", "-l", "warning",
                                                    "--without-gossip", "--without-mingle"],
                                 {"DATABASE_POOL_MAX": 8, "VLLM_CPU_KVCACHE_SPACE": 1})

    def wait_two(self) -> None:
        while True:
            with self.lock:
                if len(self.ready) >= 2:
                    return
            time.sleep(0.5)

    def killed(self, name: str) -> None:
        with self.lock:
            self.ready.discard(name)
        proc = self.procs[name]
        proc.popen.wait(30)
        proc.stop()

        def again():
            self.procs[name] = self._launch(name)
            self.stack.wait_worker(name, self.procs[name], 1200)
            with self.lock:
                self.ready.add(name)

        threading.Thread(target=again, daemon=True).start()


def one_trial(stack: Stack, workers: Workers, base: str, auth: dict, shape: str, fault: str, at: int) -> dict:
    r = stack.redis()
    body = {"model": common.POOL, "stream": True, "max_tokens": MAX_TOKENS, "temperature": 0.7, **CITY.body(shape)}
    chunks, arrivals, box = [], [], {}

    def inject(run_id: int) -> None:
        while tokens_streamed(r, run_id) < at:
            if "done" in box:
                return
            time.sleep(0.003)
        row = run_row(stack, run_id)
        holder = (row[2] or "").split("@")[0]
        proc = workers.procs[holder]
        box.update(holder=holder, at=tokens_streamed(r, run_id), fault_at=time.monotonic())
        if fault == "kill":
            os.killpg(proc.pid, signal.SIGKILL)
            return
        os.killpg(proc.pid, signal.SIGSTOP)
        end = time.monotonic() + PAUSE_LIMIT_SECONDS
        while run_row(stack, run_id)[1] < 2 and time.monotonic() < end:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGCONT)

    with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, headers=auth, timeout=300) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"{resp.status_code}: {resp.read()[:300]}")
        run_id = int(resp.headers["x-run-id"])
        thread = threading.Thread(target=inject, args=(run_id,), daemon=True)
        thread.start()
        for line in resp.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line.removeprefix("data: ")))
                arrivals.append(time.monotonic())
    box["done"] = True
    thread.join(PAUSE_LIMIT_SECONDS + 5)
    if "holder" not in box:
        return {"shape": shape, "fault": fault, "cut": False}
    if fault == "kill":
        workers.killed(box["holder"])
    end = time.monotonic() + 60
    while (row := run_row(stack, run_id))[0] in ("queued", "running") and time.monotonic() < end:
        time.sleep(0.1)
    status, attempt, worker, error, saved, completion_tokens, finish_reason = row
    client = client_text(shape, chunks)
    problem = (None if status == "completed" else f"{status}: {error}") or CITY.problem(shape, saved) or (
        None if same(shape, saved, client) else "the client streamed other text")
    return {"shape": shape, "fault": fault, "cut": True, "run": run_id, "at": box["at"], "attempt": attempt,
            "moved": (worker or "").split("@")[0] != box["holder"], "problem": problem,
            "longest_wait_s": max((b - a for a, b in zip(arrivals, arrivals[1:])), default=0.0),
            "finish_reason": finish_reason, "completion_tokens": completion_tokens,
            "saved": saved, "client": client}


def uncut(base: str, auth: dict, shape: str) -> dict:
    """One reply of the shape with no fault: its length (the random points fall within
    it), and whether it is valid (the baseline the trials are read against)."""
    body = {"model": common.POOL, "max_tokens": MAX_TOKENS, "temperature": 0.7, **CITY.body(shape)}
    out = httpx.post(f"{base}/v1/chat/completions", json=body, headers=auth, timeout=300).json()
    message, reason = out["choices"][0]["message"], out["choices"][0]["finish_reason"]
    text = message["content"] if shape == "json_schema" else json.dumps(
        [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
         for c in message.get("tool_calls") or ()] if reason != "length" else "<cut by length>")
    return {"tokens": out["usage"]["completion_tokens"], "finish_reason": reason, "problem": CITY.problem(shape, text)}


def write_report(trials: list[dict], baselines: dict[str, list[dict]], command: str) -> str:
    lines = [f"# Structured takeover ({date.today()})", "", f"`{command}`", "",
             "| shape | fault | trials | valid JSON = streamed | tokens at the fault | client's longest wait s "
             "(median / max) |", "|---|---|---|---|---|---|"]
    for shape in SHAPES:
        for fault in ("kill", "pause"):
            rows = [t for t in trials if t["shape"] == shape and t["fault"] == fault and t["cut"]]
            if not rows:
                continue
            waits = [t["longest_wait_s"] for t in rows]
            lines.append(f"| {shape} | {fault} | {len(rows)} | {sum(t['problem'] is None for t in rows)} | "
                         f"{min(t['at'] for t in rows)}-{max(t['at'] for t in rows)} | "
                         f"{statistics.median(waits):.1f} / {max(waits):.1f} |")
    failed = [t for t in trials if t["cut"] and t["problem"]]
    lines += ["", f"Failed: {len(failed)}"] + [
        f"- run {t['run']} ({t['shape']}, {t['fault']} at {t['at']}): {t['problem']}; finish_reason "
        f"{t['finish_reason']} after {t['completion_tokens']} tokens; saved {t['saved'][:300]!r}" for t in failed]
    if baselines:
        lines += ["", "Uncut replies of the same requests (no fault), the baseline:"] + [
            f"- {shape}: {sum(b['problem'] is None for b in rows)} of {len(rows)} valid; "
            f"{sum(b['finish_reason'] == 'length' for b in rows)} cut by max_tokens ({MAX_TOKENS})"
            for shape, rows in baselines.items()]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="cut trials per shape")
    parser.add_argument("--kills", type=int, default=3, help="of them SIGKILL (the rest: pauses)")
    parser.add_argument("--seed", type=int, default=433)
    parser.add_argument("--baseline", type=int, default=0, help="uncut replies per shape, with no fault")
    parser.add_argument("--tag", default="", help="a suffix of the database and the report's name")
    args = parser.parse_args()
    command = (f"bench.structured_takeover --trials {args.trials} --kills {args.kills} --seed {args.seed} "
               f"--baseline {args.baseline}" + (f" --tag {args.tag}" if args.tag else ""))
    started, rng = time.monotonic(), random.Random(args.seed)
    stack = Stack(db_name=f"bench_takeover{args.tag}", private=False, CHATSITE_RUN_LEASE=4, LOG_LEVEL="INFO",
                  CHATSITE_ALLOW_VOLATILE_REDIS=1)  # the machine's Redis: no Redis fault is measured here
    trials: list[dict] = []
    baselines: dict[str, list[dict]] = {}
    try:
        stack.manage("seed_demo")
        auth = {"Authorization": "Bearer " + stack.manage("create_api_key", "--user", "demo", "--name",
                                                          "bench").strip().splitlines()[-1]}
        _, base = stack.start_web()
        stack._start("beat", ["-m", "celery", "-A", "chatsite", "beat", "-l", "info", "-s",
                              str(common.LOG_DIR / f"beat-{common.free_port()}.schedule")], {"CHATSITE_SWEEP_SECONDS": 1})
        workers = Workers(stack, WORKERS if args.trials else WORKERS[:1])
        print(f"stack up in {time.monotonic() - started:.0f} s", flush=True)
        for shape in SHAPES:
            baselines[shape] = [uncut(base, auth, shape) for _ in range(args.baseline)]
            if baselines[shape]:
                print(f"{shape} uncut: {sum(b['problem'] is None for b in baselines[shape])} of {args.baseline} "
                      f"valid", flush=True)
            if not args.trials:
                continue
            length = uncut(base, auth, shape)["tokens"]
            faults = ["kill"] * args.kills + ["pause"] * (args.trials - args.kills)
            rng.shuffle(faults)
            for fault in faults:
                while True:
                    workers.wait_two()
                    trial = one_trial(stack, workers, base, auth, shape, fault, rng.randint(1, max(1, length - 2)))
                    if trial["cut"]:
                        break
                    print(f"{shape} {fault}: the reply ended before the fault; again", flush=True)
                trials.append(trial)
                print(f"{shape} {fault} at {trial['at']:>3} tokens: attempt {trial['attempt']}, "
                      f"{'OK' if trial['problem'] is None else 'FAILED ' + trial['problem']}, longest wait "
                      f"{trial['longest_wait_s']:.1f} s", flush=True)
    finally:
        stack.stop()
    common.write_json(f"structured_takeover{args.tag}.json", {"trials": trials, "baselines": baselines})
    report = write_report(trials, baselines, command)
    out_md = OUT_MD.with_name(f"structured_takeover{args.tag}.md")
    out_md.write_text(report)
    print()
    print(report)
    print(f"{out_md} ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
