"""Drain without waiting: N streamed replies of 2,000 tokens in flight on two workers of
one pool; one worker is drained mid-reply (`celery control drain`, mode handoff) and
hands its runs to the other at a token boundary. Per N: how soon the drained worker
holds nothing, the longest gap between two tokens any client saw, tokens lost and
sent twice per client against the saved reply, and when every reply finished.

Real daphne and Celery workers on a Redis and Postgres of their own; the deterministic
fake engine at STEP_SECONDS a step (40 tokens a second a reply, about what vLLM's CPU
build gives each of 64 replies of the demo model on this machine). Each worker has room
(CHATSITE_WORKER_SLOTS) for every run, as a pool sized to lose a worker must. ~3 min.

    .venv/bin/python -m bench.drain_handoff [--runs 16,64] [--tokens 2000] [--drain-at 400]
"""
import argparse
import asyncio
import re
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import date

import aiohttp

from bench import common, report, sse_client
from chatsite import redis_keys  # key names only; no Django
from bench.platform_stack import Stack

STEP_SECONDS = 0.025
OUT_MD, OUT_PNG = common.ROOT / "bench/out/drain_handoff.md", common.ROOT / "bench/out/drain_handoff.png"


@dataclass
class Client:
    run_id: int
    url: str
    tokens: list[tuple[float, int, int, str]] = field(default_factory=list)  # (arrival, seq, n, text)
    done_at: float | None = None
    reconnects: int = 0

    def longest_gap(self, after: float | None = None) -> float:
        times = [t for t, *_ in self.tokens if after is None or t >= after]
        return max((b - a for a, b in zip(times, times[1:])), default=0.0)


async def follow(http: aiohttp.ClientSession, base: str, auth: dict, client: Client) -> None:
    """Read the run's events to its end, reconnecting with Last-Event-ID as EventSource does."""
    last_id = None
    while client.done_at is None:
        headers = dict(auth, **({"Last-Event-ID": last_id} if last_id else {}))
        try:
            async with http.get(base + client.url, headers=headers) as resp:
                resp.raise_for_status()
                async for ev in sse_client.events(resp):
                    last_id = ev.id or last_id
                    if ev.event == "token":
                        d = ev.json()
                        client.tokens.append((ev.t, d["seq"], d["n"], d["text"]))
                    elif ev.event in ("done", "error"):
                        client.done_at = ev.t
                        break
        except (aiohttp.ClientError, asyncio.TimeoutError):
            await asyncio.sleep(0.1)
        if client.done_at is None:
            client.reconnects += 1


async def post(http, base, auth, chat_id, tokens) -> dict:
    body = {"content": "Tell me about loops.", "max_tokens": tokens, "ignore_eos": True}
    async with http.post(f"{base}/api/chats/{chat_id}/messages/", headers=auth, json=body) as resp:
        if resp.status != 202:
            raise RuntimeError(f"{resp.status}: {await resp.text()}")
        return (await resp.json())["run"]


def runs_on(stack: Stack, ids: list[int]) -> dict[int, tuple[str, str, int]]:
    with stack.sql() as conn:
        return {r[0]: (r[1], r[2], r[3]) for r in conn.execute(
            "select id, status, worker, attempt from runs_generationrun where id = any(%s)", (ids,)).fetchall()}


def saved_replies(stack: Stack, ids: list[int]) -> dict[int, tuple[str, int, int, str, str]]:
    with stack.sql() as conn:
        return {r[0]: r[1:] for r in conn.execute(
            "select r.id, r.status, r.completion_tokens, r.attempt, r.worker, m.content from runs_generationrun r "
            "join chats_message m on m.id = r.assistant_message_id where r.id = any(%s)", (ids,)).fetchall()}


def drain_client(redis_url: str, holder_prefix: str):
    """A bare Celery app on the stack's broker (no Django), its connection open and the
    workers answering: the drain's send time is then the command's, not a start-up's."""
    from celery import Celery

    app = Celery(broker=redis_url)
    end = time.monotonic() + 30
    while not [w for r in app.control.ping(timeout=1.0) for w in r if w.startswith(holder_prefix)]:
        if time.monotonic() > end:
            raise TimeoutError("the workers do not answer a ping")
    return app


def send_drain(app, holder: str) -> tuple[float, str]:
    sent = time.perf_counter()
    replies = app.control.broadcast("drain", arguments={"mode": "handoff"}, destination=[holder], reply=True,
                                    timeout=5, limit=1)
    return sent, str(next(iter(replies[0].values())) if replies else "no answer")


def watch_handover(stack: Stack, holder: str, moved: list[int]) -> tuple[float, float]:
    """When the worker's heartbeat said "draining" (the drain's first act), and when
    Postgres then showed every run in `moved` claimed by another worker (perf_counter)."""
    r, beat_key = stack.redis(), redis_keys.worker_heartbeat(holder)
    reached = None
    with stack.sql() as conn:
        while True:
            if reached is None and r.hget(beat_key, "draining") == "1":
                reached = time.perf_counter()
            if reached is not None:
                workers = conn.execute("select worker from runs_generationrun where id = any(%s)", (moved,)).fetchall()
                if all(w != holder for (w,) in workers):
                    return reached, time.perf_counter()
            time.sleep(0.01)


async def one_level(stack: Stack, base: str, auth: dict, n: int, tokens: int, drain_at: int, tag: str) -> dict:
    workers = {name: stack.start_worker(f"{name}{tag}", CHATSITE_WORKER_SLOTS=str(max(n, 2)),
                                        CHATSITE_WORKER_RESERVE_SLOTS="2") for name in ("dra", "drb")}
    chats = stack.make_chats(n)
    drainer = drain_client(stack.redis_url, "dr")
    async with sse_client.session(limit=n + 8) as http:
        started = time.perf_counter()
        runs = await asyncio.gather(*(post(http, base, auth, c, tokens) for c in chats))
        clients = [Client(r["id"], r["events_url"]) for r in runs]
        ids = [c.run_id for c in clients]
        readers = [asyncio.create_task(follow(http, base, auth, c)) for c in clients]
        # 1) mid-reply: every client has drain_at tokens or more
        while min(sum(k for _, _, k, _ in c.tokens) for c in clients) < drain_at:
            await asyncio.sleep(0.05)
        held = Counter(w for _, (s, w, _) in runs_on(stack, ids).items() if s == "running")
        holder, moved_count = held.most_common(1)[0]
        moved = [i for i, (s, w, _) in runs_on(stack, ids).items() if w == holder and s == "running"]
        # 2) drain it (`celery control drain`, mode handoff); Postgres shows when the other worker holds its runs
        drain_t, answer = await asyncio.to_thread(send_drain, drainer, holder)
        reached, taken_over = await asyncio.to_thread(watch_handover, stack, holder, moved)  # off the readers' loop
        await asyncio.gather(*readers)
        finished = max(c.done_at for c in clients) - started
    while any(st not in ("completed", "failed", "cancelled") for st, _, _ in runs_on(stack, ids).values()):
        await asyncio.sleep(0.1)  # a client sees the end before the worker's finalize commits
    worker_log = next(p for name, p in workers.items() if holder.startswith(f"{name}{tag}@")).log_path.read_text()
    drained = re.search(r"drained in ([0-9.]+) s", worker_log)
    saved = saved_replies(stack, ids)
    per_client = []
    for c in clients:
        status, completion, attempt, worker, text = saved[c.run_id]
        seen = Counter()
        for _, seq, k, _ in c.tokens:
            seen.update(range(seq, seq + k))
        per_client.append({
            "run": c.run_id, "moved": c.run_id in moved, "status": status, "attempt": attempt,
            "lost": sum(1 for i in range(completion) if i not in seen),
            "duplicated": sum(v - 1 for v in seen.values() if v > 1),
            "text_equal": "".join(t for *_, t in sorted(c.tokens, key=lambda x: x[0])) == text,
            "longest_gap_s": c.longest_gap(), "reconnects": c.reconnects, "tokens": completion})
    for p in workers.values():
        p.stop()
    moved_rows = [p for p in per_client if p["moved"]]
    return {
        "runs": n, "moved": moved_count, "tokens": tokens, "drain_at": drain_at,
        "worker_drained_s": float(drained.group(1)) if drained else None,
        "taken_over_s": taken_over - drain_t, "reached_s": reached - drain_t, "answer": answer,
        "longest_gap_s": max(p["longest_gap_s"] for p in per_client),
        "longest_gap_moved_s": max(p["longest_gap_s"] for p in moved_rows),
        "longest_gap_stayed_s": max((p["longest_gap_s"] for p in per_client if not p["moved"]), default=None),
        "lost": sum(p["lost"] for p in per_client), "duplicated": sum(p["duplicated"] for p in per_client),
        "texts_equal": all(p["text_equal"] for p in per_client),
        "completed": sum(p["status"] == "completed" for p in per_client),
        "moved_on_attempt_2": sum(p["attempt"] == 2 for p in moved_rows),
        "all_finished_s": finished, "reply_alone_s": tokens * STEP_SECONDS,
        "timeline": [[round(t - started, 3), k] for c in clients for t, _, k, _ in c.tokens],
        "drain_at_s": drain_t - started, "clients": per_client,
    }


def write_report(levels: list[dict], command: str) -> str:
    header = ["runs", "moved", "worker drained (s)", "drain reached it (s)", "all taken over (s)",
              "longest gap, moved (s)", "longest gap, stayed (s)", "lost", "duplicated", "texts equal",
              "completed", "all finished (s)", "a reply alone (s)"]
    rows = [[lv["runs"], lv["moved"], lv["worker_drained_s"], lv["reached_s"], lv["taken_over_s"],
             lv["longest_gap_moved_s"], lv["longest_gap_stayed_s"], lv["lost"], lv["duplicated"], lv["texts_equal"],
             f"{lv['completed']}/{lv['runs']}", lv["all_finished_s"], lv["reply_alone_s"]] for lv in levels]
    table = report.table(header, [[f"{c:.2f}" if isinstance(c, float) else c for c in r] for r in rows])
    text = (f"# Drain without waiting (issue 43 section 5)\n\n`{command}` ({date.today().isoformat()}, load "
            f"{common.loadavg():.1f} on {socket.gethostname()})\n\n"
            f"Two fake-engine workers of one pool ({STEP_SECONDS * 1000:.0f} ms a step: 40 tokens/s a reply), N "
            f"streamed replies of {levels[0]['tokens']} tokens, each followed over SSE; when every client had "
            f"{levels[0]['drain_at']} tokens, the worker holding most runs was drained (`celery control drain`, "
            "mode handoff, sent from a client already connected). *worker drained*: the worker's own figure, from the "
            "drain reaching it until it held no lease (each run released and dispatched again); *drain reached it*: "
            "from the command's send until the worker's heartbeat said \"draining\" (the drain's first act); *all "
            "taken over*: from the command's send until Postgres showed every moved run claimed by the other worker; "
            "*longest gap*: the longest time between two token events one client saw, "
            "among the moved runs' clients and the others'; *lost* and *duplicated*: token positions of the saved "
            "reply a client never got, and got twice, summed over clients. Goals: drained within 5 s, 0 lost, 0 "
            "duplicated.\n\n" + table + "\n\n![tokens per second](drain_handoff.png)\n")
    OUT_MD.write_text(text)
    return table


def plot(levels: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(levels), figsize=(5.5 * len(levels), 3.8), squeeze=False)
    for ax, lv in zip(axes[0], levels):
        bins = Counter()  # tokens per quarter second
        for t, k in lv["timeline"]:
            bins[int(t * 4)] += k
        xs = sorted(bins)
        ax.plot([x / 4 for x in xs], [bins[x] * 4 for x in xs], lw=1)
        ax.axvline(lv["drain_at_s"], color="red", ls=":", label="drain command")
        ax.set_title(f"{lv['runs']} replies, {lv['moved']} handed over")
        ax.set_xlabel("seconds since the first post")
        ax.set_ylabel("tokens/s reaching the clients")
        ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(OUT_PNG, dpi=110)


async def main_async(args) -> list[dict]:
    stack = Stack(db_name="bench_drain", CHATSITE_ENGINE="fake", CHATSITE_FAKE_STEP_SECONDS=str(STEP_SECONDS))
    try:
        auth = {"Authorization": f"Bearer {stack.seed()}"}
        with stack.sql() as conn:
            conn.execute("update pools_modelpool set max_output_tokens = %s, context_length = %s, "
                         "max_queue_wait_seconds = 100000 where name = %s", (args.tokens, args.tokens + 1024,
                                                                            common.POOL))
        _, base = stack.start_web()
        levels = []
        for n in args.runs:
            levels.append(await one_level(stack, base, auth, n, args.tokens, args.drain_at, tag=f"-{n}"))
            lv = levels[-1]
            print(f"N={n}: {lv['moved']} moved, worker drained in {lv['worker_drained_s']} s, taken over "
                  f"{lv['taken_over_s']:.2f} s, longest gap {lv['longest_gap_s']:.2f} s, lost {lv['lost']}, "
                  f"duplicated {lv['duplicated']}, all finished {lv['all_finished_s']:.1f} s", flush=True)
        return levels
    finally:
        stack.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="16,64", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--drain-at", type=int, default=400, help="tokens every client has when the drain starts")
    args = parser.parse_args()
    command = "bench.drain_handoff " + " ".join(
        f"--{k.replace('_', '-')} {','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in vars(args).items())
    started = time.monotonic()
    levels = asyncio.run(main_async(args))
    common.write_json("drain_handoff.json", [{k: v for k, v in lv.items() if k != "timeline"} for lv in levels])
    print()
    print(write_report(levels, command))
    plot(levels)
    print(f"\n{OUT_MD}, {OUT_PNG} ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
