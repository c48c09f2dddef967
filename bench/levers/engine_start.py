"""Where a worker's engine start goes: a real Celery worker for one pool, timed phase by phase.

Starts `celery -A chatsite worker --model-pool POOL` exactly as the Procfile does,
stamps every line of its log as it arrives, and splits the time to "taking work"
at the milestones vLLM and the worker log. With --profile the worker runs under
`py-spy record --subprocesses`, and the samples of each process (the worker's
front end, vLLM's engine core, its model worker) are summed by what they were
doing: importing modules, loading weights, allocating the KV cache, ...

    .venv/bin/python -m bench.levers.engine_start --pool flagship [--profile] [--runs 2]
    # another configuration: a copy of the pool (bench-flagship) with engine_args overridden;
    # --kv-gib 0 leaves VLLM_CPU_KVCACHE_SPACE unset (vLLM sizes the KV cache itself)
    .venv/bin/python -m bench.levers.engine_start --pool flagship --engine-args '{"dtype": "bfloat16"}' --kv-gib 0

Needs the pool's row (scripts/setup.sh seeds it) in DATABASE_URL's database and a
Redis (REDIS_URL) no other worker of that pool consumes. Prints figures, asserts nothing.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "out"
# (log text, the phase that ends when it appears), in the order they appear.
MILESTONES = [
    ("starting the engine for", "celery + Django boot"),
    ("Resolved architecture", "vLLM import in the worker, model config read"),
    ("Initializing a V1 LLM engine", "engine-core process: spawn + imports"),
    ("Starting to load model", "model-worker process: spawn + imports"),
    ("Loading weights took", "weights loaded"),
    ("CPU KV cache size", "KV cache sized"),
    ("init engine (profile, create kv cache, warmup model)", "KV cache allocated, model warmed up"),
    ("engine ready in", "front end ready (tokenizer, output processor)"),
    ("taking work", "worker taking work"),
]
SAMPLE_RATE = 50


def _classify(stack: str) -> str:
    if "_find_and_load" in stack:
        return "importing modules"
    for needle, what in (("load_model", "loading weights"), ("allocate_kv_cache", "allocating the KV cache"),
                         ("initialize_kv_cache", "KV cache setup"), ("profile_run", "memory profile run"),
                         ("warm", "warmup"), ("okenizer", "loading a tokenizer")):
        if needle in stack:
            return what
    if any(w in stack for w in ("wait_for_engine_startup", "poll", "select (", "sleep", "recv", "acquire_read")):
        return "waiting for another process"
    return "other"


def summarize_profile(raw: Path) -> dict:
    """Seconds of samples per (process, activity) from py-spy's raw (collapsed) output."""
    names = {1: "worker (front end)", 2: "engine core", 3: "model worker"}
    out: dict = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        depth = sum(f.startswith("process ") for f in frames)
        code = ";".join(f for f in frames if not f.startswith("process "))
        out[(names.get(depth, f"process {depth}"), _classify(code))] += int(count) / SAMPLE_RATE
    return dict(out)


def pool_variant(pool: str, overrides: dict) -> str:
    """A disabled copy of `pool` named bench-POOL with `overrides` on its engine_args (Django, the dev database)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    django.setup()
    from chatsite.pools.models import ModelPool

    row = ModelPool.objects.get(name=pool)
    copy, _ = ModelPool.objects.update_or_create(name=f"bench-{pool}", defaults={
        "display_name": f"bench copy of {pool}", "model": row.model, "context_length": row.context_length,
        "device": row.device, "engine_args": {**row.engine_args, **overrides}, "enabled": False})
    return copy.name


def _stop(proc: subprocess.Popen, *, profiled: bool) -> None:
    """A warm shutdown of the worker (SIGTERM). Under py-spy the worker is py-spy's child: stopping
    it lets py-spy write its samples and exit by itself."""
    import psutil

    targets = psutil.Process(proc.pid).children() if profiled else [psutil.Process(proc.pid)]
    for target in targets:
        target.terminate()
    try:
        proc.wait(90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait(10)


def start_once(pool: str, *, profile: Path | None, timeout: float, kv_gib: int) -> dict:
    cmd = [sys.executable, "-m", "celery", "-A", "chatsite", "worker", "--model-pool", pool, "-n",
           f"bench-{pool}@%h", "-l", "info", "--without-gossip", "--without-mingle"]
    if profile is not None:
        cmd = [str(ROOT / ".venv" / "bin" / "py-spy"), "record", "--subprocesses", "--rate", str(SAMPLE_RATE),
               "--format", "raw", "-o", str(profile), "--", *cmd]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "DATABASE_POOL_MAX": "8", "VLLM_CPU_KVCACHE_SPACE": str(kv_gib)}
    if not kv_gib:
        env.pop("VLLM_CPU_KVCACHE_SPACE")
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    stamps, pending, log = {}, list(MILESTONES), []
    try:
        for line in proc.stdout:
            now = time.monotonic() - started
            log.append(f"{now:7.2f} {line.rstrip()}")
            while pending and pending[0][0] in line:
                stamps[pending.pop(0)[1]] = now
            if not pending or now > timeout:
                break
    finally:
        _stop(proc, profiled=profile is not None)
    (OUT / f"engine_start_{pool}.log").write_text("\n".join(log) + "\n")
    phases, last = {}, 0.0
    for _, phase in MILESTONES:
        if phase in stamps:
            phases[phase], last = stamps[phase] - last, stamps[phase]
    return {"total_s": last, "phases_s": phases, "missing": [p for _, p in MILESTONES if p not in stamps]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default="flagship")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="run the worker under py-spy (slows it down)")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--kv-gib", type=int, default=2, help="VLLM_CPU_KVCACHE_SPACE (the Procfile's flagship: 2)")
    parser.add_argument("--engine-args", type=json.loads, default=None, help="JSON overrides: runs a copy of the pool")
    a = parser.parse_args()
    pool = pool_variant(a.pool, a.engine_args) if a.engine_args else a.pool
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for i in range(a.runs):
        raw = ROOT / "var" / "log" / f"engine_start_{pool}.raw" if a.profile else None  # large: not kept in git
        r = start_once(pool, profile=raw, timeout=a.timeout, kv_gib=a.kv_gib)
        r.update(pool=pool, engine_args=a.engine_args, kv_gib=a.kv_gib, load_average=os.getloadavg()[0])
        print(f"run {i + 1} ({pool}, KV {a.kv_gib or 'vLLM default'} GiB, load {r['load_average']:.1f}): "
              f"worker taking work after {r['total_s']:.1f} s" + (f" (missing {r['missing']})"
                                                                               if r["missing"] else ""))
        for phase, seconds in r["phases_s"].items():
            print(f"  {seconds:6.1f} s  {phase}")
        if raw is not None and raw.exists():
            time.sleep(1)
            profile = summarize_profile(raw)
            r["profile_s"] = {f"{p} / {what}": round(s, 1) for (p, what), s in profile.items()}
            print("  py-spy samples (seconds of one core):")
            for (p, what), s in sorted(profile.items(), key=lambda kv: -kv[1]):
                if s >= 0.2:
                    print(f"  {s:6.1f} s  {p}: {what}")
        results.append(r)
    (OUT / f"engine_start_{pool}.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
