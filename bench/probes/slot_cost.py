"""What does a stream's slot cost: taken (StreamGuard.admit_sync, one EVAL) and given back
(close(): the loop's releaser), against giving it back through redis-py's client (a task
per close awaiting ZREM, the releaser's alternative)? Instructions per cycle, counted by
callgrind (valgrind must be installed): the probe runs itself twice under valgrind, with
0 and with --cycles cycles, and prints the difference per cycle. Each cycle then waits 2 ms
in both arms (close() no longer waits for the answer; the wait lets it arrive), counted in.

    .venv/bin/python -m bench.probes.slot_cost [--cycles 1000]
"""
import argparse
import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path

from bench import common

ROOT = Path(__file__).resolve().parents[2]


def _cycles(n: int, via: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    import django

    django.setup()
    from chatsite import redis_keys
    from chatsite.redis_client import get_async_redis, get_redis
    from chatsite.tenancy.revocation import Grant
    from chatsite.tenancy.stream_guard import StreamGuard

    get_redis().set(redis_keys.revocations_loaded(), 1)  # as a running site has it
    grant = Grant(run_id=1, chat_id=999_001, tenant_id=999_001, user_id=999_001, credential="", since=time.time())

    async def give_back_by_client(guard):
        async def zrem():
            with contextlib.suppress(Exception):
                await get_async_redis().zrem(guard._slots_key, guard._slot_id)
        guard._closed = True
        await asyncio.shield(asyncio.ensure_future(zrem()))

    async def main():
        for _ in range(n + 1):  # the first one warms up
            guard = StreamGuard.admit_sync(grant)
            if via == "releaser":
                guard.close()  # queued; the releaser sends it when the loop turns
            else:
                await give_back_by_client(guard)
            await asyncio.sleep(0.002)  # both arms: the ZREM's answer read before the next cycle

    asyncio.run(main())


def _count(n: int, via: str) -> int:
    return common.callgrind_instructions([sys.executable, "-m", "bench.probes.slot_cost", "--inner", str(n),
                                          "--via", via], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--inner", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--via", default="releaser", choices=["releaser", "client"])
    args = parser.parse_args()
    if args.inner is not None:
        _cycles(args.inner, args.via)
        return
    for via in ("releaser", "client"):
        per = (_count(args.cycles, via) - _count(0, via)) / args.cycles
        print(f"slot taken and given back via {via}: {per / 1000:.0f} K instructions a stream")


if __name__ == "__main__":
    main()
