"""What the security checks cost on the hot paths, against the real Redis (prints figures).

    DJANGO_SETTINGS_MODULE=chatsite.settings_test .venv/bin/python -m bench.probes.security_costs

- an open SSE stream's revocation check (one EVAL: refresh its slot, read its markers),
  alone and with 1,000 streams checking at once on one event loop;
- a stream's admission (the same EVAL with the cap) and its release;
- minting and verifying an events token (no I/O);
- the sign-in lock lookup made before each password check.
"""
import asyncio
import os
import statistics
import time
from types import SimpleNamespace

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings_test")

import django  # noqa: E402

django.setup()

from chatsite.runs.access import events_token, token_grants  # noqa: E402
from chatsite.tenancy.revocation import Grant  # noqa: E402
from chatsite.tenancy.stream_guard import StreamGuard  # noqa: E402
from chatsite.tenancy.throttle import login_refusal  # noqa: E402


def _grant(i: int) -> Grant:
    return Grant(run_id=i, chat_id=i, tenant_id=1 + i % 50, user_id=1000 + i % 500, credential=f"key:{i}",
                 since=time.time())


def _us(samples) -> str:
    return f"median {statistics.median(samples) * 1e6:.0f} us, p95 {sorted(samples)[int(len(samples) * .95)] * 1e6:.0f} us"


async def _streams(n_streams: int, rounds: int) -> None:
    guards = []
    t0 = time.perf_counter()
    for i in range(n_streams):
        guards.append(await StreamGuard.admit(_grant(i)))
    print(f"admit {n_streams} streams one by one: {(time.perf_counter() - t0) / n_streams * 1e6:.0f} us each")
    one = []
    cpu = time.process_time()
    for i in range(rounds):
        t = time.perf_counter()
        await guards[i % n_streams].check()
        one.append(time.perf_counter() - t)
    cpu = (time.process_time() - cpu) / rounds
    print(f"a stream's check (1 EVAL: slot + 5 markers): {_us(one)} round trip, {cpu * 1e6:.0f} us of this "
          f"process's CPU; {n_streams} open streams checking every 3 s: {cpu * n_streams / 3 * 100:.1f}% of a core")
    for _ in range(2):  # warm: one connection per concurrent check
        await asyncio.gather(*(g.check() for g in guards))
    t, cpu = time.perf_counter(), time.process_time()
    for _ in range(5):
        await asyncio.gather(*(g.check() for g in guards))
    print(f"{n_streams} streams checking at the same instant: {(time.perf_counter() - t) / 5 * 1000:.0f} ms for "
          f"all, {(time.process_time() - cpu) / (5 * n_streams) * 1e6:.0f} us CPU per check")
    t = time.perf_counter()
    await asyncio.gather(*(g.close() for g in guards))
    print(f"release: {(time.perf_counter() - t) / n_streams * 1e6:.0f} us each (concurrent)")


def _tokens(rounds: int) -> None:
    run = SimpleNamespace(pk=123456, chat_id=654321, tenant_id=42, chat=SimpleNamespace(owner_id=777))
    mint, check = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        token = events_token(run)
        mint.append(time.perf_counter() - t)
        t = time.perf_counter()
        assert token_grants(token, run.pk)
        check.append(time.perf_counter() - t)
    print(f"events token ({len(token)} chars): mint {_us(mint)}; verify {_us(check)}")


def _login(rounds: int) -> None:
    request = SimpleNamespace(META={"REMOTE_ADDR": "198.51.100.1"})
    samples = []
    for _ in range(rounds):
        t = time.perf_counter()
        login_refusal(request, "someone")
        samples.append(time.perf_counter() - t)
    print(f"sign-in lock lookup (1 pipelined round trip: 3 HGETs, 1 EXISTS): {_us(samples)}")


if __name__ == "__main__":
    asyncio.run(_streams(int(os.environ.get("BENCH_STREAMS", "1000")), rounds=2000))
    _tokens(5000)
    _login(2000)
