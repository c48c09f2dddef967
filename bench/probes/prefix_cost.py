"""What does routing by the kept token ids cost, in instructions (callgrind)? For the web,
the router's round trip for a run that builds on a reply with kept ids (prefix_index.lookup:
the chat's pin and each indexed prefix's holder, one script) against the pin's GET it
replaces; for the worker, its finalize round trip with the reply's prefixes indexed
(prefix_index.hold, then the pin) against the pin alone, for replies of 100, 2,000 and
8,000 kept ids in 16-token blocks.

Each case runs under valgrind's callgrind after the same setup, N times; a run with no
case gives the setup's own count, subtracted. Needs valgrind and a Redis (a free bench
database is claimed: bench.platform_stack.claim_redis_db).

    .venv/bin/python -m bench.probes.prefix_cost [--calls 200] [--sizes 100,2000,8000]
"""
import argparse
import os
import random
import sys
from pathlib import Path

from bench import common

ROOT = Path(__file__).resolve().parents[2]
SIZES = (100, 2000, 8000)
BLOCK = 16


def _inner(case: str, calls: int) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    import django

    django.setup()
    from chatsite import redis_keys
    from chatsite.redis_client import get_redis
    from chatsite.runs import prefix_index
    from chatsite.runs.routing import affinity_pin

    rng = random.Random(0)
    records = {n: [rng.randrange(1, 50_000) for _ in range(n)] for n in SIZES}
    r = get_redis()
    pipe = r.pipeline(transaction=False)
    for n, ids in records.items():  # every reply's prefixes held, as a busy pool has them
        prefix_index.hold(pipe, pool="probe", worker="w@probe", token_ids=ids, block=BLOCK, reply_id=n)
    affinity_pin(chat_id=1, worker="w@probe", redis=pipe)
    pipe.execute()
    prefix_index.lookup(chat_id=1, reply_id=SIZES[0], pool="probe")  # the script loaded, as in a running web
    r.get(redis_keys.chat_affinity(1))
    kind, _, size = case.partition("_")
    for _ in range(calls):
        if case == "pin_get":
            r.get(redis_keys.chat_affinity(1))
        elif kind == "lookup":
            prefix_index.lookup(chat_id=1, reply_id=int(size), pool="probe")
        else:
            pipe = r.pipeline(transaction=False)
            if kind == "hold":
                prefix_index.hold(pipe, pool="probe", worker="w@probe", token_ids=records[int(size)], block=BLOCK,
                                  reply_id=int(size))
            affinity_pin(chat_id=1, worker="w@probe", redis=pipe)
            pipe.execute()


def _count(case: str, calls: int, env: dict) -> int:
    return common.callgrind_instructions([sys.executable, "-m", "bench.probes.prefix_cost", "--inner", case,
                                          "--calls", str(calls)], cwd=ROOT, env=env)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="kept ids of the replies measured")
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner is not None:
        _inner(args.inner, args.calls)
        return
    from bench.platform_stack import REDIS_BASE, claim_redis_db

    env = {**os.environ, "PYTHONPATH": str(ROOT), "REDIS_URL": f"{REDIS_BASE}/{claim_redis_db()}"}
    sizes = [int(n) for n in args.sizes.split(",")]
    cases = ("pin_get", *(f"lookup_{n}" for n in sizes), "pin_pipe", *(f"hold_{n}" for n in sizes))
    base = _count("pin_get", 0, env)
    per = {case: (_count(case, args.calls, env) - base) / args.calls for case in cases}
    print(f"web, a run's router round trip: the pin's GET {per['pin_get'] / 1000:.1f} K instructions; "
          + ", ".join(f"lookup of {n} kept ids {per[f'lookup_{n}'] / 1000:.1f} K" for n in sizes))
    print(f"worker, the finalize's pin: {per['pin_pipe'] / 1000:.1f} K instructions; with the prefixes indexed: "
          + ", ".join(f"{n} ids {per[f'hold_{n}'] / 1000:.1f} K" for n in sizes))


if __name__ == "__main__":
    main()
