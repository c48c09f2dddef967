"""CPU of one stream-hub read as the streams a web process follows grow, most of them
idle: this checkout's hub against another revision's, interleaved, in one process on the
local Redis (the machine's, or REDIS_URL's).

    PYTHONPATH=. .venv/bin/python -m bench.hub_reads [--against 8151c93] [--streams 1,64,256,1024]
                                                    [--reads 2000] [--reps 2]

One stream gets an entry, its subscriber takes it, `--reads` times; the other streams
are followed and quiet. Each round is one XREAD the hub builds, sends and parses, and
one delivery. Prints this process's CPU per round (the hub, plus the XADD that feeds it,
the same in both arms) and Redis's (INFO's used_cpu; an XREAD BLOCK registers on every
stream it names, whatever the hub does). 8151c93 formatted every followed stream's
position into each XREAD.
"""
import argparse
import asyncio
import time

from bench import common, report

KEY = "bench:hub:{}"


def _redis_cpu(r) -> float:
    info = r.info("cpu")
    return info["used_cpu_sys"] + info["used_cpu_user"]


async def _rounds(module, streams: int, reads: int, aclient, r) -> tuple[float, float]:
    hub = module.StreamHub()
    live = await hub.subscribe(KEY.format("live"), "0-0")
    idle = [await hub.subscribe(KEY.format(i), "0-0") for i in range(streams - 1)]
    for _ in range(20):  # warm: the hub's first reads
        await aclient.xadd(KEY.format("live"), {"t": "x"})
        await live.next(5)
    cpu, redis_cpu = time.process_time(), _redis_cpu(r)
    for _ in range(reads):
        await aclient.xadd(KEY.format("live"), {"t": "x"})
        batch = await live.next(5)
        assert batch, "the hub delivered nothing within 5 s"
    out = (1e6 * (time.process_time() - cpu) / reads, 1e6 * (_redis_cpu(r) - redis_cpu) / reads)
    for sub in [live, *idle]:
        hub.unsubscribe(sub)
    await hub._client.xadd(hub._wake_key, {"w": "1"})  # let its read return and the reader end
    await asyncio.sleep(0.05)
    await hub._client.aclose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", default="8151c93")
    ap.add_argument("--streams", default="1,64,256,1024")
    ap.add_argument("--reads", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    common.django_setup()
    import redis.asyncio as aioredis
    from django.conf import settings

    from chatsite.redis_client import get_redis
    from chatsite.runs.stream import hub as current

    other = common.module_at(a.against, "chatsite/runs/stream/hub.py")
    r = get_redis()
    r.delete(KEY.format("live"))
    rows = []

    async def run():
        aclient = aioredis.Redis.from_url(settings.REDIS_URL)
        for rep in range(a.reps):
            for n in map(int, a.streams.split(",")):
                for name, module in ((a.against, other), ("this checkout", current)):
                    hub_us, redis_us = await _rounds(module, n, a.reads, aclient, r)
                    print(f"[rep {rep + 1}] {n:5d} streams, {name:>13}: {hub_us:6.1f} us CPU a read here, "
                          f"Redis {redis_us:6.1f}", flush=True)
                    rows.append([rep + 1, n, name, hub_us, redis_us])
                    r.delete(KEY.format("live"))
        await aclient.aclose()

    asyncio.run(run())
    print()
    print(report.table(["rep", "streams followed", "hub", "this process us/read", "redis us/read"], rows))


if __name__ == "__main__":
    main()
