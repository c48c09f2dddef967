"""The floors the platform's token path is held to, measured in the same run as it.

    .venv/bin/python -m bench.floor [--clients 50,100,200,400,800] [--seconds 6] [--tag X]

1) Redis (a server of the bench's own): a pipelined XADD of one token entry to each
   of 64 streams; one XREAD over 64 streams; and the platform's own write, the fenced
   append (chatsite.runs.stream.log: one Lua call for 64 runs). Client and Redis CPU
   per entry.
2) SSE servers, one process each, N clients from a cheap load generator
   (bench/loadgen.py): the bare ASGI app (bench/bare_sse.py) under daphne and under
   uvicorn, and the platform's web under both, following N run streams that a
   separate writer process feeds one entry every 50 ms. Per level: frames/s
   delivered, delay p50/p99 (writer's clock -> client), server CPU per frame, the
   load generator's CPU per frame. Capacity: the most frames/s at p99 <= 50 ms.
Writes bench/out/floor{tag}.md, .json and .png.
"""
import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

import redis

from bench import common, loadgen, report
from bench.services import PrivateRedis

TICK = 0.05
P99_LIMIT_MS = 50.0
STREAMS = 64
TEXT = " word word word word"  # a 4-token entry


def entry(seq: int) -> dict:
    """A token entry as chatsite.runs.stream.codec writes it (one field)."""
    return {"t": f"{seq} 4 1 {TEXT}"}


# --- 1) Redis -----------------------------------------------------------------------
def redis_floor(url: str, server_pid: int, rounds: int = 1500) -> list[dict]:
    r = redis.Redis.from_url(url, decode_responses=True)
    keys = [f"floor:{i}" for i in range(STREAMS)]
    r.delete(*keys)
    out = []

    def measure(name, fn, entries):
        c0, s0 = time.process_time(), common.cpu_seconds(server_pid)
        fn()
        c1, s1 = time.process_time(), common.cpu_seconds(server_pid)
        out.append({"operation": name, "entries": entries, "client_us_per_entry": 1e6 * (c1 - c0) / entries,
                    "redis_us_per_entry": 1e6 * (s1 - s0) / entries})

    def xadd():
        for k in range(rounds):
            pipe = r.pipeline(transaction=False)
            for key in keys:
                pipe.xadd(key, entry(k))
            pipe.execute()

    def xread():
        cursors = {key: "0-0" for key in keys}
        while True:
            got = r.xread(cursors, count=64)
            if not got:
                return
            for key, items in got:
                cursors[key] = items[-1][0]

    measure("pipelined XADD, 1 entry to each of 64 streams", xadd, rounds * STREAMS)
    measure("XREAD over 64 streams", xread, rounds * STREAMS)
    r.delete(*keys)
    out.append(fenced_append(url, server_pid, rounds))
    r.delete(*keys)
    return out


def fenced_append(url: str, server_pid: int, rounds: int) -> dict:
    """The platform's write, through its own code (needs Django settings for the TTL)."""
    code = f"""
import os, time, json
os.environ["DJANGO_SETTINGS_MODULE"] = "chatsite.settings"; os.environ["REDIS_URL"] = {url!r}
import django; django.setup()
from chatsite.runs.stream import lease, log
runs = list(range(880000, 880000 + {STREAMS}))
tokens = {{r: lease.acquire(r, "floor") for r in runs}}
c0 = time.process_time()
for k in range({rounds}):
    log.append([log.Write(r, tokens[r], token={{"t": f"{{k * 4}} 4 1 {TEXT}"}}) for r in runs])
print(json.dumps(time.process_time() - c0))
"""
    s0 = common.cpu_seconds(server_pid)
    res = subprocess.run([common.PY, "-c", code], cwd=common.ROOT, capture_output=True, text=True, timeout=600)
    s1 = common.cpu_seconds(server_pid)
    if res.returncode:
        raise RuntimeError(res.stderr[-2000:])
    client = json.loads(res.stdout.strip().splitlines()[-1])
    r = redis.Redis.from_url(url)
    r.delete(*[f"run:{i}" for i in range(880000, 880000 + STREAMS)], *[f"run:{i}:lease" for i in range(880000, 880000 + STREAMS)])
    n = rounds * STREAMS
    return {"operation": "the platform's fenced append, 64 runs per call", "entries": n,
            "client_us_per_entry": 1e6 * client / n, "redis_us_per_entry": 1e6 * (s1 - s0) / n}


# --- 2) SSE servers -------------------------------------------------------------------
def writer_main(url: str, keys: list[str]) -> None:
    """The synthetic writer: one entry to every stream every TICK seconds, all in one
    atomic call (MULTI/EXEC), as a worker's fenced append writes a step of all its runs."""
    r = redis.Redis.from_url(url)
    # Carry on from each stream's last seq: a level reuses the streams of the one
    # before, and a follower skips a seq it has already seen as a repeat.
    pipe = r.pipeline(transaction=False)
    for key in keys:
        pipe.xrevrange(key, count=1)
    seqs = [int(last[0][1][b"t"].split(b" ", 2)[0]) + 4 if last else 0 for last in pipe.execute()]
    while True:
        t0 = time.monotonic()
        pipe = r.pipeline(transaction=True)
        for i, key in enumerate(keys):
            pipe.xadd(key, entry(seqs[i]))
            seqs[i] += 4
        pipe.execute()
        time.sleep(max(0.0, TICK - (time.monotonic() - t0)))


class Server:
    def __init__(self, name: str, cmd: list[str], env: dict, port: int):
        self.name, self.port = name, port
        common.LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log = open(common.LOG_DIR / f"floor-{name}.log", "w")
        self.proc = subprocess.Popen(cmd, cwd=common.ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        import httpx

        for _ in range(300):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise TimeoutError(f"{name} did not start; see {self.log.name}")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def server_cmd(kind: str, app: str, port: int) -> list[str]:
    return [common.PY, *common.server_args(kind, app, port)]


PROFILE: dict = {}  # server name -> path of a py-spy profile to record at its last level (--profile)


async def level(server: Server, paths: list[str], seconds: float, extra_pids: dict, profile: str = "") -> dict:
    stats = loadgen.Stats()
    done = []
    for i in range(0, len(paths), 50):  # no connect storm
        done += [await loadgen.open_stream("127.0.0.1", server.port, p, stats) for p in paths[i:i + 50]]
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.5)
    stats.reset(time.time() * 1000)
    pids = {"server": server.proc.pid, **extra_pids}
    meter = common.CpuMeter(pids)
    gen0 = loadgen.cost()
    spy = None
    if profile:
        spy = subprocess.Popen([str(common.ROOT / ".venv" / "bin" / "py-spy"), "record", "-p", str(server.proc.pid),
                                "-d", str(int(seconds)), "-r", "200", "--nonblocking", "-f", "raw", "-o", profile],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    meter.start()
    await asyncio.sleep(seconds)
    cpu = meter.stop()
    gen = loadgen.cost() - gen0
    frames, delays = stats.frames, list(stats.delays_ms)
    if spy is not None:
        spy.wait(30)
    await _close_all()
    wall = cpu["wall_s"]
    per = {k: (1e6 * v / frames if v is not None and frames else None) for k, v in cpu["proc_cpu_s"].items()}
    return {"clients": len(paths), "offered_fps": len(paths) / TICK, "fps": frames / wall,
            "p50_ms": common.pct(delays, 50), "p99_ms": common.pct(delays, 99),
            "server_us_per_frame": per["server"], "loadgen_us_per_frame": 1e6 * gen / frames if frames else None,
            "others_us_per_frame": {k: v for k, v in per.items() if k != "server"},
            "errors": len(stats.errors), "machine_busy_pct": 100 * cpu["machine_busy_s"] / (wall * os.cpu_count())}


async def _close_all():
    """Hang up every stream (what closing a browser tab does) and give the server a moment."""
    import gc

    for obj in gc.get_objects():
        if isinstance(obj, loadgen.SSEProtocol) and obj.transport is not None and not obj.transport.is_closing():
            obj.transport.close()
    await asyncio.sleep(1.0)


def sweep(name: str, server: Server, paths_for, clients: list[int], seconds: float, extra_pids, before_level=None):
    rows = []
    for n in clients:
        hook = before_level(n) if before_level else None
        profile = PROFILE.get(name, "") if n == clients[-1] else ""
        try:
            row = asyncio.run(level(server, paths_for(n), seconds, extra_pids(hook) if hook else extra_pids(None),
                                    profile))
        finally:
            if hook is not None:
                hook.terminate()
                hook.wait(10)
        row["server"] = name
        rows.append(row)
        print(f"[{name}] {n} clients: {row['fps']:.0f} frames/s (offered {row['offered_fps']:.0f}), p50 "
              f"{report.fmt(row['p50_ms'])} p99 {report.fmt(row['p99_ms'])} ms, server "
              f"{report.fmt(row['server_us_per_frame'])} us/frame, load generator "
              f"{report.fmt(row['loadgen_us_per_frame'])} us/frame", flush=True)
        if row["p99_ms"] is None or row["p99_ms"] > 4 * P99_LIMIT_MS:
            break
    return rows


def capacity(rows: list[dict]) -> dict | None:
    ok = [r for r in rows if r["p99_ms"] is not None and r["p99_ms"] <= P99_LIMIT_MS and r["errors"] == 0]
    return max(ok, key=lambda r: r["fps"]) if ok else None


def plot(rows: list[dict], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for name in dict.fromkeys(r["server"] for r in rows):
        mine = [r for r in rows if r["server"] == name]
        a.plot([r["clients"] for r in mine], [r["p99_ms"] for r in mine], marker="o", label=name)
        b.plot([r["clients"] for r in mine], [r["fps"] for r in mine], marker="o", label=name)
    a.axhline(P99_LIMIT_MS, color="grey", ls="--", lw=1)
    a.set(xlabel="SSE clients (one frame each every 50 ms)", ylabel="p99 delay, ms", yscale="log",
          title="delivery delay")
    b.set(xlabel="SSE clients", ylabel="frames/s delivered", title="throughput")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def platform_servers(stack, max_clients: int):
    """The platform's web under daphne and uvicorn, and N runs to follow."""
    out = subprocess.run([common.PY, "-m", "bench.make_runs", str(max_clients)], cwd=common.ROOT, env=stack.env,
                         capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    runs = json.loads(out.stdout.strip().splitlines()[-1])
    env = {**stack.env, "DATABASE_POOL_MAX": "24"}
    servers = {}
    for kind in ("daphne", "uvicorn"):
        port = common.free_port()
        servers[f"platform web ({kind})"] = lambda kind=kind, port=port: Server(
            f"platform-{kind}", [common.PY, *common.web_args(kind, port)], env, port)
    return runs, servers


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", default="50,100,200,400,800")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--tag", default="")
    ap.add_argument("--skip-platform", action="store_true")
    ap.add_argument("--skip-bare", action="store_true")
    ap.add_argument("--profile", action="store_true", help="py-spy the platform's web at the last level")
    ap.add_argument("--writer", nargs=2, metavar=("REDIS_URL", "KEYS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.writer:
        return writer_main(a.writer[0], a.writer[1].split(","))
    loadgen.use_uvloop()
    clients = [int(x) for x in a.clients.split(",") if x]
    tag = f"_{a.tag}" if a.tag else ""
    data: dict = {"clients": clients, "seconds": a.seconds}
    srv = PrivateRedis()
    data["redis"] = redis_floor(srv.url, srv.pid)
    srv.stop()
    for row in data["redis"]:
        print(f"[redis] {row['operation']}: client {row['client_us_per_entry']:.1f} us, redis "
              f"{row['redis_us_per_entry']:.1f} us per entry", flush=True)
    rows = []
    if a.profile:
        for kind in ("daphne", "uvicorn"):
            PROFILE[f"platform web ({kind})"] = str(common.OUT / f"profile_floor{tag}_web_{kind}.txt")
    for kind in () if a.skip_bare else ("daphne", "uvicorn"):
        port = common.free_port()
        server = Server(f"bare-{kind}", server_cmd(kind, "bench.bare_sse:app", port), dict(os.environ), port)
        try:
            rows += sweep(f"bare ASGI ({kind})", server, lambda n: ["/sse"] * n, clients, a.seconds,
                          lambda hook: {})
        finally:
            server.stop()
    if not a.skip_platform:
        from bench.platform_stack import Stack

        stack = Stack(db_name="bench_floor")
        try:
            stack.seed()
            runs, servers = platform_servers(stack, max(clients))
            for name, start in servers.items():
                server = start()

                def writer(n):
                    keys = ",".join(f"run:{r['id']}" for r in runs[:n])
                    return subprocess.Popen([common.PY, "-m", "bench.floor", "--writer", stack.redis_url, keys],
                                            cwd=common.ROOT)

                try:
                    rows += sweep(name, server, lambda n: [r["events_url"] for r in runs[:n]], clients, a.seconds,
                                  lambda hook: {"writer": hook.pid, "redis": stack.redis_server.pid},
                                  before_level=writer)
                finally:
                    server.stop()
                    stack.redis().flushdb()
        finally:
            stack.stop()
    data["sse"] = rows
    best = {name: capacity([r for r in rows if r["server"] == name]) for name in dict.fromkeys(r["server"] for r in rows)}
    data["capacity"] = {k: (v["fps"] if v else None) for k, v in best.items()}
    common.write_json(f"floor{tag}.json", data)
    plot(rows, common.OUT / f"floor{tag}.png")
    text = tables(data)
    (common.OUT / f"floor{tag}.md").write_text(text + "\n")
    print(text)


def tables(data: dict) -> str:
    red = report.table(["operation", "entries", "client us/entry", "redis us/entry"],
                       [[r["operation"], r["entries"], r["client_us_per_entry"], r["redis_us_per_entry"]]
                        for r in data["redis"]])
    sse = report.table(["server", "clients", "offered frames/s", "delivered frames/s", "p50 ms", "p99 ms",
                        "server us/frame", "load generator us/frame", "others us/frame", "machine busy %"],
                       [[r["server"], r["clients"], r["offered_fps"], r["fps"], r["p50_ms"], r["p99_ms"],
                         r["server_us_per_frame"], r["loadgen_us_per_frame"],
                         ", ".join(f"{k} {v:.0f}" for k, v in r["others_us_per_frame"].items() if v is not None),
                         r["machine_busy_pct"]] for r in data["sse"]])
    bare = data["capacity"].get("bare ASGI (daphne)")
    caps = "\n".join(f"- {k}: {report.fmt(v)} frames/s" + (f" ({v / bare:.2f}x the bare daphne app)" if v and bare
                                                           else "") for k, v in data["capacity"].items())
    return (f"Redis floors (a Redis server of the bench's own, AOF everysec)\n{red}\n\n"
            f"SSE servers: one frame per client every {TICK * 1000:.0f} ms ({data['seconds']:.0f} s per level)\n{sse}"
            f"\n\nCapacity (most frames/s with p99 <= {P99_LIMIT_MS:.0f} ms)\n{caps}")


if __name__ == "__main__":
    main()
