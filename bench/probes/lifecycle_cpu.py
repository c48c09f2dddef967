"""CPU, SQL statements and Redis commands of one run's life, phase by phase, in one process:
the message POST (DRF view and admission, through Django's test client: no HTTP
server, no thread hops), the claim, one token and the terminal entry through the
fenced append, and the finalize.

    .venv/bin/python -m bench.probes.lifecycle_cpu [--runs 200] [--root DIR] [--tag X]

Each phase is timed with the process's CPU clock (time.process_time), so a busy
machine stretches it less than wall time; the figures are medians over the runs,
after 10 warm-up runs. The database connection comes from a psycopg pool as in the
web (DATABASE_POOL_MAX), and the stack's Redis and Postgres are its own
(bench/services.py). `--root DIR` runs another checkout's code: run both back to
back for an A/B of a change. Writes bench/out/lifecycle_cpu{_tag}.md.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

from bench import common, report

PHASES = ("post", "claim", "append", "finalize")
BODY = {"content": "Explain how a for loop walks over a list, and what range returns.", "max_tokens": 1,
        "temperature": 0.0, "seed": 0, "ignore_eos": True}


def inner(runs: int, key: str, profile: bool = False) -> None:
    import django

    django.setup()
    from django.db import connection
    from django.test import Client

    from chatsite.runs.services import run_claim, run_finalize, run_release
    from chatsite.runs.stream import codec, log

    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    warm = 10
    chats = [client.post("/api/chats/", {"model": common.POOL}, content_type="application/json").json()["id"]
             for _ in range(runs + warm)]
    statements = {p: 0 for p in PHASES}
    redis_commands = {p: 0 for p in PHASES}
    counting = [None]
    from chatsite.redis_client import get_redis

    def commands_so_far() -> int:  # Redis's own count, read outside the timed phase (the INFO counts too)
        return get_redis().info("stats")["total_commands_processed"]

    def count_sql(execute, sql, params, many, context):
        if counting[0] is not None:
            statements[counting[0]] += 1
        return execute(sql, params, many, context)

    cpu = {p: [] for p in PHASES}
    profiles = {}
    if profile:
        import cProfile
        profiles = {p: cProfile.Profile(time.process_time) for p in PHASES}  # CPU, not wall

    def timed(phase, fn, *args, **kwargs):
        counting[0] = phase
        commands = commands_so_far()
        prof = profiles.get(phase)
        c0 = time.process_time()
        if prof is not None:
            prof.enable()
        try:
            return fn(*args, **kwargs)
        finally:
            if prof is not None:
                prof.disable()
            cpu[phase].append(time.process_time() - c0)
            counting[0] = None
            redis_commands[phase] += commands_so_far() - commands - 1

    with connection.execute_wrapper(count_sql):
        for i, chat in enumerate(chats):
            r = timed("post", client.post, f"/api/chats/{chat}/messages/", BODY, content_type="application/json")
            assert r.status_code == 202, r.content
            run_id = r.json()["run"]["id"]
            claim = timed("claim", run_claim, run_id=run_id, worker="bench")
            assert claim is not None
            token = codec.token_fields(seq=0, n=1, text=" A", attempt=claim.run.attempt)
            done = codec.done_fields(finish_reason="length", prompt_tokens=20, completion_tokens=1)
            timed("append", log.append, [log.Write(run_id, claim.lease_token, token=token, terminal=done)])
            run = timed("finalize", run_finalize, run_id=run_id)
            assert run is not None and run.status == "completed", run
            connection.close()  # as the worker does between runs (back to the pool)
            run_release(run_id=run_id, lease_token=claim.lease_token)
            if i == warm - 1:
                cpu = {p: [] for p in PHASES}
                statements = {p: 0 for p in PHASES}
                redis_commands = {p: 0 for p in PHASES}
    n = len(cpu["post"])
    if profile:
        import io
        import pstats
        out = io.StringIO()
        for phase, prof in profiles.items():
            out.write(f"=== {phase}\n")
            prof.dump_stats(f"/tmp/lifecycle_{phase}.prof")  # for pstats queries
            stats = pstats.Stats(prof, stream=out)
            stats.sort_stats("cumulative").print_stats(40)
            stats.sort_stats("tottime").print_stats(25)
        (common.OUT / "profile_lifecycle.txt").write_text(out.getvalue())
    print(json.dumps({"runs": n, "cpu_ms": {p: 1000 * statistics.median(v) for p, v in cpu.items()},
                      "cpu_ms_mean": {p: 1000 * statistics.fmean(v) for p, v in cpu.items()},
                      "statements": {p: statements[p] / n for p in PHASES},
                      "redis_commands": {p: redis_commands[p] / n for p in PHASES}}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--root", default=str(common.ROOT))
    ap.add_argument("--tag", default="")
    ap.add_argument("--profile", action="store_true", help="cProfile each phase into bench/out/profile_lifecycle.txt")
    ap.add_argument("--inner-key", default="")
    a = ap.parse_args()
    if a.inner_key:
        return inner(a.runs, a.inner_key, a.profile)
    from bench.platform_stack import Stack

    stack = Stack(db_name="bench_lifecycle", root=a.root)
    try:
        key = stack.seed()
        with stack.sql() as conn:  # no worker runs here: the pool takes runs while none is up
            conn.execute("update pools_modelpool set queue_when_cold = true where name = %s", (common.POOL,))
        env = {**stack.env, "CHATSITE_ENGINE": "fake", "DATABASE_POOL_MAX": "4",
               "PYTHONPATH": a.root}
        # The other checkout needs this file too (copy it there for an A/B of older code).
        proc = subprocess.run([common.PY, "-m", "bench.probes.lifecycle_cpu", "--runs", str(a.runs),
                               "--inner-key", key, *(["--profile"] if a.profile else [])],
                              cwd=a.root, env=env, capture_output=True, text=True)
    finally:
        stack.stop()
    if proc.returncode:
        sys.exit(proc.stdout + proc.stderr)
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = [[p, data["cpu_ms"][p], data["cpu_ms_mean"][p], data["statements"][p], data["redis_commands"][p]]
            for p in PHASES]
    rows.append(["total", *(sum(data[k].values()) for k in ("cpu_ms", "cpu_ms_mean", "statements",
                                                              "redis_commands"))])
    text = (f"{data['runs']} one-token runs, one at a time, in one process (code of {a.root}); CPU of that "
            f"process (Postgres and Redis not included)\n"
            + report.table(["phase", "CPU ms (median)", "CPU ms (mean)", "SQL statements", "Redis commands"], rows))
    tag = f"_{a.tag}" if a.tag else ""
    (common.OUT / f"lifecycle_cpu{tag}.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
