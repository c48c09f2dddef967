"""cProfile of the message POST (admission), the step that dominates the platform's
time to first token: N sequential POSTs through Django's test client against a
fresh bench database (no worker runs, so the runs stay queued).

    .venv/bin/python -m bench.profile_post [--posts 40]

Prints the wall time per POST and the top functions by cumulative and own time;
writes bench/out/profile_post.txt.
"""
import argparse
import os
import subprocess
import sys

from bench import common


def inner(posts: int, key: str) -> None:
    import cProfile
    import io
    import pstats
    import time

    import django

    django.setup()
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    chats = [client.post("/api/chats/", {"model": common.POOL}, content_type="application/json").json()["id"]
             for _ in range(posts + 3)]
    body = {"content": "Explain how a for loop walks over a list.", "max_tokens": 128, "temperature": 0.0,
            "seed": 0, "ignore_eos": True}
    for chat in chats[:2]:  # warm-up: imports, tokenizer caches
        client.post(f"/api/chats/{chat}/messages/", body, content_type="application/json")
    from django.db import connection

    queries = []

    def log_sql(execute, sql, params, many, context):
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            queries.append((time.perf_counter() - t, sql))
    with connection.execute_wrapper(log_sql):  # one POST's SQL, in order
        client.post(f"/api/chats/{chats[-1]}/messages/", body, content_type="application/json")
    prof = cProfile.Profile()
    t0, c0 = time.perf_counter(), time.process_time()
    prof.enable()
    for chat in chats[2:-1]:
        r = client.post(f"/api/chats/{chat}/messages/", body, content_type="application/json")
        assert r.status_code == 202, r.content
    prof.disable()
    n = len(chats) - 3
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    out.write(f"{n} POSTs: {1000 * wall / n:.1f} ms wall and {1000 * cpu / n:.1f} ms CPU of this process each "
              f"(in-process test client under cProfile, no HTTP server; a new Postgres connection per request as "
              f"CONN_MAX_AGE=0)\n{len(queries)} SQL statements in one POST:\n")
    for t, sql in queries:
        out.write(f"  {1000 * t:6.1f} ms  {sql[:140]}\n")
    stats.sort_stats("cumulative").print_stats(35)
    stats.sort_stats("tottime").print_stats(20)
    text = out.getvalue().replace(str(common.ROOT) + "/", "").replace(
        str(common.ROOT / ".venv" / "lib" / "python3.11" / "site-packages") + "/", "")
    (common.OUT / "profile_post.txt").write_text(text)
    print(text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--posts", type=int, default=40)
    ap.add_argument("--inner-key", default="")
    a = ap.parse_args()
    if a.inner_key:
        return inner(a.posts, a.inner_key)
    from bench.platform_stack import Stack

    stack = Stack(db_name="bench_probe")
    key = stack.seed()
    with stack.sql() as conn:  # no worker runs here: the pool queues while none is up
        conn.execute("update pools_modelpool set queue_when_cold = true where name = %s", (common.POOL,))
    proc = subprocess.run([common.PY, "-m", "bench.profile_post", "--posts", str(a.posts), "--inner-key", key],
                          cwd=common.ROOT, env={**stack.env, "CHATSITE_ENGINE": "fake"})
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
