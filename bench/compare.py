"""Side by side: (a) vLLM AsyncLLM in process, (b) vLLM's own OpenAI server,
(c) the platform end to end through its REST API (POST a message, GET its SSE), and
with --openai (d) the same platform processes through a streamed /v1/chat/completions;
same model, same pinned engine arguments, same prompts, same output length.

    .venv/bin/python -m bench.compare [--reps 2] [--levels 1,8,32,64] [--openai] [--profile] [--tag NAME]

The machine is shared (other sessions' test suites and model builds come and go),
so the arms are interleaved instead of run one after the other: all three are
loaded first, then for each repetition and level the arms are driven one at a
time, in an order that changes each time (reversed every other time, rotated every
two: `arm_order`), so a burst of someone else's load hits every arm alike and no arm
always follows the same one. An arm that is not being driven is idle (its engine
sleeps; its CPU is measured and reported). Each arm's figures pool all its repetitions.

Writes bench/out/compare[_tag].{json,md,png}.
"""
import argparse
import asyncio
import json
import os
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path

from bench import common, report, sse_client
from bench.arm_platform import PlatformArm, PlatformOpenAIArm, check_saved
from bench.arm_server import ServerArm


class EngineProc:
    """Arm (a) in its own process (bench.arm_engine --serve), one level per command."""

    def start(self) -> None:
        common.LOG_DIR.mkdir(parents=True, exist_ok=True)
        self._log = open(common.LOG_DIR / "arm_engine.log", "w")
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2")}
        self.proc = subprocess.Popen([common.PY, "-m", "bench.arm_engine", "--serve"], cwd=common.ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                     start_new_session=True)

    def wait_ready(self) -> None:
        line = self._read("READY ")
        self.pids = json.loads(line)["pids"]

    def _read(self, prefix: str) -> str:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"arm (a) exited; see {self._log.name}")
            if line.startswith(prefix):
                return line[len(prefix):]

    async def level(self, c: int) -> tuple[list[common.Request], float]:
        self.proc.stdin.write(json.dumps({"concurrency": c}) + "\n")
        self.proc.stdin.flush()
        data = json.loads(await asyncio.to_thread(self._read, "RESULT "))
        reqs = [common.Request(**{**r, "arrivals": [tuple(x) for x in r["arrivals"]]}) for r in data["requests"]]
        return reqs, data["wall"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
        self._log.close()


def start_all(arms: dict) -> None:
    """Load the engines at once (each in its own process); returns when all serve."""
    for arm in arms.values():
        if isinstance(arm, EngineProc):
            arm.start()
    errors = []

    def run(fn):
        try:
            fn()
        except Exception as exc:  # re-raised below, after the others finish
            errors.append(exc)
    threads = [threading.Thread(target=run, args=(arm.wait_ready if isinstance(arm, EngineProc) else arm.start,))
               for arm in arms.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def all_pids(arms: dict) -> dict:
    pids = {f"{k}:{name}": pid for k, arm in arms.items() for name, pid in arm.pids.items()}
    pids["client"] = os.getpid()
    return pids


def arm_order(arms: str, turn: int) -> str:
    """The order of the arms in the `turn`-th (repetition, level) pair: every other turn
    the previous one reversed (so any two arms run in both orders within two turns), and
    rotated by one every two turns. Rotation alone kept a cyclic order: with three levels,
    arm c ran right before arm e at each, and an A/B of c against e (the same platform,
    another checkout) could read an arm's position as part of its code's effect."""
    shift = (turn // 2) % len(arms)
    order = arms[shift:] + arms[:shift]
    return order[::-1] if turn % 2 else order


async def measure(arms: dict, levels: list[int], reps: int, profile: bool) -> dict:
    """Drive the arms one at a time, their order changing per repetition and level (`arm_order`)."""
    pids = all_pids(arms)
    raw = defaultdict(lambda: defaultdict(list))  # arm -> level -> [(reqs, wall, cpu, extra)]
    async with sse_client.session(limit=0) as http:
        for arm in arms.values():
            if hasattr(arm, "warm_up"):
                await arm.warm_up(http)
        await asyncio.sleep(3)  # past vLLM's short busy-wait after the last step
        meter = common.CpuMeter(pids)
        meter.start()
        await asyncio.sleep(5)
        idle = meter.stop()
        for rep in range(reps):
            for li, c in enumerate(levels):
                for arm in arm_order("".join(arms), rep * len(levels) + li):
                    meter = common.CpuMeter(pids)
                    meter.start()
                    result = await arms[arm].level(c)
                    cpu = meter.stop()
                    reqs, wall = result[0], result[1]
                    extra = result[2] if len(result) > 2 else {}
                    raw[arm][c].append((reqs, wall, cpu, extra))
                    toks = sum(r.tokens for r in reqs if not r.error)
                    print(f"[rep {rep + 1}] c={c} arm {arm}: {toks / wall:.0f} tok/s, "
                          f"{sum(bool(r.error) for r in reqs)} errors", flush=True)
        prof = await arms["c"].profile(max(levels)) if profile and "c" in arms else None
    return {"raw": raw, "idle": idle, "profile": prof}


def pooled(arm: str, runs: list, arm_pids: dict, stack=None) -> dict:
    reqs = [r for rs, _, _, _ in runs for r in rs]
    wall = sum(w for _, w, _, _ in runs)
    out = common.summarize(reqs, wall, common.OUTPUT_TOKENS)
    out["tok_s_reps"] = [sum(r.tokens for r in rs if not r.error) / w for rs, w, _, _ in runs]
    names = [f"{arm[0]}:{n}" for n in arm_pids] + (["client"] if arm != "a" else [])
    proc = {n.split(":", 1)[-1]: sum(cpu["proc_cpu_s"][n] or 0 for _, _, cpu, _ in runs) for n in names}
    ours = sum(sum(v or 0 for v in cpu["proc_cpu_s"].values()) for _, _, cpu, _ in runs)
    out["cpu"] = {"wall_s": sum(cpu["wall_s"] for _, _, cpu, _ in runs), "proc_cpu_s": proc, "ours_cpu_s": ours,
                  "machine_busy_s": sum(cpu["machine_busy_s"] for _, _, cpu, _ in runs),
                  "machine_cores": os.cpu_count()}
    if arm in report.PLATFORM_ARMS:
        delays = [d for _, _, _, e in runs for d in e["delays"]]
        out.update(post_retries=sum(e["post_retries"] for _, _, _, e in runs),
                   snapshots=sum(e.get("snapshots", 0) for _, _, _, e in runs),
                   delivery_ms_p50=common.pct(delays, 50), delivery_ms_p99=common.pct(delays, 99),
                   pg_peak=max(e["pg_peak"] for _, _, _, e in runs),
                   pg_server_peak=max(e["pg_server_peak"] for _, _, _, e in runs),
                   pg_lock_waiters=sum(e.get("pg_mean_lock_waiters", 0) for _, _, _, e in runs) / len(runs),
                   accounting=check_saved(stack, reqs))
    return out


def render(arms: dict, tag: str = "", prompt_tokens: str = "~64") -> str:
    text = ("Throughput and latency (ITL per token: an event with n tokens spreads its gap over n tokens)\n"
            + report.comparison_table(arms) + "\n\nPlatform against the engine\n" + report.ratio_table(arms)
            + "\n\nCPU per streamed token (microseconds)\n" + report.cpu_table(arms))
    png = common.OUT / f"compare{tag}.png"
    report.plot_compare(arms, png, prompt_tokens)
    return text + f"\n\nplot: {png.relative_to(common.ROOT)}"


def run_phase(arms: dict, levels, reps, profile) -> tuple[dict, dict]:
    started = time.monotonic()
    try:
        start_all(arms)
        print(f"arms {', '.join(arms)} loaded in {time.monotonic() - started:.0f} s", flush=True)
        res = asyncio.run(measure(arms, levels, reps, profile))
    finally:
        for arm in arms.values():
            try:
                arm.stop()
            except Exception as exc:  # keep stopping the others
                print("stop failed:", exc)
    return {arm: {"pids": arms[arm].pids, "levels": {
        str(c): pooled(arm, runs, arms[arm].pids, getattr(arms[arm], "stack", None))
        for c, runs in sorted(res["raw"][arm].items())}} for arm in arms}, res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--levels", default=",".join(map(str, common.LEVELS)))
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--profile", action="store_true", help="py-spy the web process and the worker after the levels")
    ap.add_argument("--tag", default="")
    ap.add_argument("--openai", action="store_true",
                    help="add arm (d): the platform of arm (c) through streamed /v1/chat/completions")
    ap.add_argument("--base-root", default="",
                    help="add arm (e) (and (f) with --openai): the platform of another checkout (a worktree of the "
                         "commit before a change), interleaved with (c) and (d) for an A/B in one run")
    ap.add_argument("--base-server", choices=("daphne", "uvicorn"), default="daphne",
                    help="the web server of arms (e) and (f); with --base-root . the same code under uvicorn")
    ap.add_argument("--colocate-baselines", action="store_true",
                    help="give arms (a) and (b) the platform's engine-core placement too (default: vLLM as shipped)")
    a = ap.parse_args()
    if a.colocate_baselines:
        os.environ["BENCH_COLOCATE_BASELINES"] = "1"
    tag = f"_{a.tag}" if a.tag else ""
    levels = [int(x) for x in a.levels.split(",")]
    prompts = common.make_contents(max(map(common.requests_for, levels)))
    slots = max(64, *levels)
    platform = PlatformArm(prompts, worker_slots=slots)
    arms = {"a": EngineProc(), "b": ServerArm(prompts), "c": platform}
    if a.openai:
        arms["d"] = PlatformOpenAIArm(platform)
    if a.base_root:
        base = PlatformArm(prompts, worker_slots=slots, db_name="bench_chatsite_base", root=Path(a.base_root),
                            server=a.base_server)
        arms["e"] = base
        if a.openai:
            arms["f"] = PlatformOpenAIArm(base)
    if a.base_root and a.base_server != "daphne":
        report.ARM_NAMES.update(e=f"(e) as (c), {a.base_server}", f=f"(f) as (d), {a.base_server}")
    summary, res = run_phase(arms, levels, a.reps, a.profile)
    lengths = sorted({len(ids) for _, ids in prompts})
    prompt_tokens = f"{lengths[0]}-{lengths[-1]}" if len(lengths) > 1 else str(lengths[0])
    meta = {"prompt_tokens": prompt_tokens, "reps": a.reps, "colocated_baselines": a.colocate_baselines, "idle_cpu_s": res["idle"], "profile": res["profile"],
            "level_max_seconds": common.LEVEL_MAX_SECONDS, "stagger_seconds": common.STAGGER_SECONDS}
    common.write_json(f"compare{tag}.json", {"meta": meta, "arms": summary})
    idle = {k: round(v, 2) for k, v in res["idle"]["proc_cpu_s"].items() if v}
    text = (f"{a.reps} repetitions, arms interleaved; at most {common.LEVEL_MAX_SECONDS:.0f} s of new requests per "
            f"level; CPU s used by the loaded arms while all idle for {res['idle']['wall_s']:.0f} s: {idle or 'none'}"
            + f"\nprompts of {prompt_tokens} tokens (chat template included), {common.OUTPUT_TOKENS} output tokens, "
            f"temperature 0, ignore_eos\n\n" + render(summary, tag, prompt_tokens))
    (common.OUT / f"compare{tag}.md").write_text(text + "\n")
    print(text)
    if res["profile"]:
        from bench import profiles

        print("\n" + profiles.summary(res["profile"]))


if __name__ == "__main__":
    main()
