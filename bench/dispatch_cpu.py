"""CPU of `run_dispatch` for a pool-queue run (affinity lookup, fair-queue record, the
Celery message), this checkout's against another revision's dispatch module, interleaved,
in one process on the local Redis (the machine's, or REDIS_URL's).

    PYTHONPATH=. .venv/bin/python -m bench.dispatch_cpu [--against 2d4c444] [--runs 3000]

2d4c444 is the last revision that sent through Celery's send_task.
"""
import argparse
import time
import types

from bench import common


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", default="2d4c444")
    ap.add_argument("--runs", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    common.django_setup()
    from chatsite.redis_client import get_redis
    from chatsite.runs import dispatch as current

    other = common.module_at(a.against, "chatsite/runs/dispatch.py")
    r, pool = get_redis(), types.SimpleNamespace(name="bench-dispatch")

    def runs():  # what run_dispatch reads of a run; a chat pinned nowhere, so the pool queue
        return [types.SimpleNamespace(pk=10_000_000 + i, pool=pool, tier="interactive", tenant_id=999_999,
                                      chat_id=888_888) for i in range(a.runs)]

    for _ in range(a.reps):
        for name, module in ((a.against, other), ("this checkout", current)):
            batch = runs()
            t = time.process_time()
            for run in batch:
                module.run_dispatch(run)
            print(f"{name:>14}: {1e6 * (time.process_time() - t) / a.runs:6.0f} us CPU per dispatch")
            r.delete("pool.bench-dispatch.interactive", *(r.keys("fair:bench-dispatch:*") or ["-"]))


if __name__ == "__main__":
    main()
