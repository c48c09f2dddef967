"""A constrained reply survives its worker, on the real engine (issue 43 §3): N trials
each of a JSON Schema reply and a `tool_choice: required` call, streamed from
/v1/chat/completions, the worker writing it SIGKILLed or paused (SIGSTOP, its whole
process group: the engine with it) past its lease at a random token of the reply; another
worker takes the run up, its grammar advanced over the reply so far
(inference.carried_grammar). A trial passes when the saved reply is valid JSON of its
schema and equal to what the client streamed. Per shape and fault: trials, passes, the
tokens at the fault, and the client's longest wait between two chunks.

Real daphne, three Celery workers of the demo flagship pool (SmolLM2-135M-Instruct on
vLLM's CPU build, temperature 0.7) and beat sweeping every second, on a fresh database and
Redis db of the machine's servers; the lease is 4 s as in the tests. A killed worker is
started again in the background while the other two go on. ~15-30 min on 2 busy cores.

    .venv/bin/python -m bench.structured_takeover [--trials 20] [--kills 3]
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
import jsonschema

from bench import common
from bench.platform_stack import Proc, Stack
from chatsite import redis_keys  # key names only; no Django

OUT_MD = common.ROOT / "bench/out/structured_takeover.md"
WORKERS = ("ta", "tb", "tc")
PAUSE_LIMIT_SECONDS = 60
REPORT = {"type": "object", "additionalProperties": False, "required": ["city", "country", "capital", "landmarks"],
          "properties": {"city": {"type": "string", "maxLength": 20},
                         "country": {"type": "string", "enum": ["France", "Italy", "Spain"]},
                         "capital": {"type": "boolean"},
                         "landmarks": {"type": "array", "items": {"type": "string", "maxLength": 24},
                                       "minItems": 2, "maxItems": 3}}}
WEATHER = {"type": "object", "additionalProperties": False, "required": ["city", "unit", "days"],
           "properties": {"city": {"type": "string", "maxLength": 30},
                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                          "days": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}}}
SHAPES = {
    "json_schema": {"response_format": {"type": "json_schema", "json_schema": {"name": "report", "schema": REPORT}},
                    "messages": [{"role": "user", "content": "Describe Paris in JSON."}]},
    "tool_required": {"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}],
                      "tool_choice": "required",
                      "messages": [{"role": "user", "content": "What is the weather in Paris this week?"}]},
}


def valid(shape: str, text: str) -> str | None:
    """None if `text` is a whole reply of its shape, else what is wrong."""
    try:
        value = json.loads(text)
        if shape == "json_schema":
            jsonschema.validate(value, REPORT)
        else:
            assert isinstance(value, list) and value, "no call"
            for call in value:
                assert call["name"] == "get_weather", call["name"]
                jsonschema.validate(call["arguments"], WEATHER)
    except (ValueError, AssertionError, KeyError, TypeError, jsonschema.ValidationError) as exc:
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    return None


def streamed(shape: str, chunks: list[dict]) -> str:
    """What the client read, as the saved reply writes it: the content, or the calls' JSON."""
    deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
    if shape == "json_schema":
        return "".join(d.get("content") or "" for d in deltas)
    calls: dict[int, dict] = {}
    for d in deltas:
        for part in d.get("tool_calls") or ():
            call = calls.setdefault(part["index"], {"name": "", "arguments": ""})
            call["name"] += part.get("function", {}).get("name") or ""
            call["arguments"] += part.get("function", {}).get("arguments") or ""
    try:
        return json.dumps([{"name": c["name"], "arguments": json.loads(c["arguments"])} for _, c in sorted(calls.items())])
    except ValueError:
        return "<calls that do not parse>"


def same(shape: str, saved: str, client: str) -> bool:
    if shape == "json_schema":
        return saved == client
    try:  # the calls the client read, against the saved text's (its spacing is the model's)
        return json.loads(client) == [{"name": c["name"], "arguments": c["arguments"]} for c in json.loads(saved)]
    except (ValueError, KeyError, TypeError):
        return False


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
        return conn.execute("select r.status, r.attempt, r.worker, r.error, m.content from runs_generationrun r join "
                            "chats_message m on m.id = r.assistant_message_id where r.id = %s", (run_id,)).fetchone()


class Workers:
    """Three vLLM workers; a killed one is started again in the background."""

    def __init__(self, stack: Stack):
        self.stack = stack
        self.procs: dict[str, Proc] = {}
        self.ready: set[str] = set()
        self.lock = threading.Lock()
        for name in WORKERS:
            self.procs[name] = self._launch(name)
        for name in WORKERS:
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
    body = {"model": common.POOL, "stream": True, "max_tokens": 200, "temperature": 0.7, **SHAPES[shape]}
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
    status, attempt, worker, error, saved = row
    client = streamed(shape, chunks)
    problem = (None if status == "completed" else f"{status}: {error}") or valid(shape, saved) or (
        None if same(shape, saved, client) else "the client streamed other text")
    return {"shape": shape, "fault": fault, "cut": True, "run": run_id, "at": box["at"], "attempt": attempt,
            "moved": (worker or "").split("@")[0] != box["holder"], "problem": problem,
            "longest_wait_s": max((b - a for a, b in zip(arrivals, arrivals[1:])), default=0.0),
            "saved": saved, "client": client}


def reference_tokens(stack: Stack, base: str, auth: dict, shape: str) -> int:
    """How long the shape's reply is, uncut (the random points fall within it)."""
    body = {"model": common.POOL, "max_tokens": 200, "temperature": 0.7, **SHAPES[shape]}
    out = httpx.post(f"{base}/v1/chat/completions", json=body, headers=auth, timeout=300).json()
    return out["usage"]["completion_tokens"]


def write_report(trials: list[dict], command: str) -> str:
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
    lines += ["", f"Failed: {len(failed)}"] + [f"- run {t['run']} ({t['shape']}, {t['fault']} at {t['at']}): "
                                                f"{t['problem']}; saved {t['saved']!r}" for t in failed]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="cut trials per shape")
    parser.add_argument("--kills", type=int, default=3, help="of them SIGKILL (the rest: pauses)")
    parser.add_argument("--seed", type=int, default=433)
    args = parser.parse_args()
    command = f"bench.structured_takeover --trials {args.trials} --kills {args.kills} --seed {args.seed}"
    started, rng = time.monotonic(), random.Random(args.seed)
    stack = Stack(db_name="bench_takeover", private=False, CHATSITE_RUN_LEASE=4, LOG_LEVEL="INFO")
    trials: list[dict] = []
    try:
        stack.manage("seed_demo")
        auth = {"Authorization": "Bearer " + stack.manage("create_api_key", "--user", "demo", "--name",
                                                          "bench").strip().splitlines()[-1]}
        _, base = stack.start_web()
        stack._start("beat", ["-m", "celery", "-A", "chatsite", "beat", "-l", "info", "-s",
                              str(common.LOG_DIR / f"beat-{common.free_port()}.schedule")], {"CHATSITE_SWEEP_SECONDS": 1})
        workers = Workers(stack)
        print(f"stack up in {time.monotonic() - started:.0f} s", flush=True)
        for shape in SHAPES:
            length = reference_tokens(stack, base, auth, shape)
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
    common.write_json("structured_takeover.json", [{k: v for k, v in t.items()} for t in trials])
    report = write_report(trials, command)
    OUT_MD.write_text(report)
    print()
    print(report)
    print(f"{OUT_MD} ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
