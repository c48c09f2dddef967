"""A shared chat's fan-out: one run followed through its share link by 1, 10 and 100 viewers
(no account), each reading the run's stream from its start through the one outlet.

    .venv/bin/python -m bench.share_fanout [--viewers 1,10,100] [--tokens 400] [--rate 50] [--reps 2]

The platform runs on a Redis and a Postgres of its own (bench/platform_stack.py), with the
fake engine writing --tokens tokens at --rate a second. Per level: CPU of the web process and
of Redis over the run (from /proc), per token delivered (tokens x viewers) and per token
generated; the delivery delay (a viewer's receive time minus the stream entry's id, Redis's
clock at XADD; only entries written after the viewer connected), p50 and p99. The target
(issue 43): at most 10% more web + Redis CPU per delivered token at 100 viewers than at one.
One more viewer joins halfway through each run (a late joiner): its text, and every viewer's,
must be exactly the reply the owner's chat saved. Last, a run followed by the most viewers
through a new link that its owner revokes a third of the way in: how long until each
viewer's stream ends. Levels run interleaved, --reps times; the
median rep is reported, with the cores the bench's own readers used (they share the machine)
and the machine's busy cores. Writes bench/out/share_fanout.md and .png. About 2 minutes.
"""
import argparse
import asyncio
import os
import statistics
import time

import httpx

from bench import common, report, sse_client
from bench.platform_stack import Stack

CONTENT = "Tell me a long story about a lighthouse keeper."


async def _view(http, url: str, delays: list) -> str:
    """One viewer from the stream's start; its text."""
    connected_ms = time.time() * 1000
    text = ""
    async with http.get(url) as resp:
        assert resp.status == 200, (resp.status, await resp.text())
        async for ev in sse_client.events(resp):
            if ev.event == "token":
                written = int(ev.id.split("-")[0])
                if written >= connected_ms:
                    delays.append(ev.wall_ms - written)
                text += ev.json()["text"]
            elif ev.event == "snapshot":
                text = ev.json()["text"]
            elif ev.event in ("done", "error"):
                return text
    return text


async def _events_url(api: httpx.AsyncClient, token: str, run_id: int) -> str:
    data = (await api.get(f"/api/shared/{token}")).json()
    live = next(m for m in data["messages"] if m["run"] and m["run"]["id"] == run_id)
    return live["run"]["events_url"]


async def _saved_reply(api: httpx.AsyncClient, token: str, run_id: int) -> str:
    """The reply as the owner's chat saved it (once the run is finalized)."""
    for _ in range(200):
        data = (await api.get(f"/api/shared/{token}")).json()
        msg = next(m for m in data["messages"] if m["run"] and m["run"]["id"] == run_id)
        if msg["run"]["status"] in ("completed", "failed", "cancelled"):
            return msg["content"]
        await asyncio.sleep(0.1)
    raise TimeoutError(f"run {run_id} did not end")


async def level(stack, api, http, pids, chat_id: int, token: str, viewers: int, tokens: int, rate: float) -> dict:
    resp = await api.post(f"/api/chats/{chat_id}/messages/", json={
        "content": CONTENT, "max_tokens": tokens, "ignore_eos": True})
    assert resp.status_code == 202, resp.text
    run_id = resp.json()["run"]["id"]
    url = stack_url(api) + await _events_url(api, token, run_id)
    delays: list[float] = []
    meter = common.CpuMeter(pids)
    meter.start()
    views = [asyncio.create_task(_view(http, url, delays)) for _ in range(viewers)]
    await asyncio.sleep(tokens / rate / 2)
    late = await _view(http, url, [])  # halfway through: the text so far in a burst, then live
    texts = await asyncio.gather(*views)
    cpu = meter.stop()
    saved = await _saved_reply(api, token, run_id)
    delivered = tokens * (viewers + 1)
    per = {k: (1e6 * v / delivered if v is not None else None) for k, v in cpu["proc_cpu_s"].items()}
    return {"viewers": viewers, "run": run_id, "tokens": tokens, "delivered": delivered,
            "exact": all(t == saved for t in texts) and late == saved, "saved_chars": len(saved),
            "us_per_delivered": per,
            "us_per_generated": {k: (1e6 * v / tokens if v is not None else None)
                                 for k, v in cpu["proc_cpu_s"].items()},
            "delay_ms_p50": common.pct(delays, 50), "delay_ms_p99": common.pct(delays, 99), "cpu": cpu}


async def revocation(api, http, chat_id: int, viewers: int, tokens: int, rate: float) -> dict:
    """`viewers` follow a run through a new link; the owner revokes it a third of the way in:
    how long until each viewer's stream ends (the check runs every SHARE_REVOCATION_CHECK_SECONDS)."""
    share = (await api.post(f"/api/chats/{chat_id}/shares/", json={})).json()
    resp = await api.post(f"/api/chats/{chat_id}/messages/", json={
        "content": CONTENT, "max_tokens": tokens, "ignore_eos": True})
    run_id = resp.json()["run"]["id"]
    url = stack_url(api) + await _events_url(api, share["token"], run_id)
    ends: list[float] = []

    async def view():
        await _view(http, url, [])
        ends.append(time.monotonic())

    views = [asyncio.create_task(view()) for _ in range(viewers)]
    await asyncio.sleep(tokens / rate / 3)
    revoked = time.monotonic()
    assert (await api.delete(f"/api/chats/{chat_id}/shares/{share['id']}/")).status_code == 200
    await asyncio.gather(*views)
    cut = [1000 * (t - revoked) for t in ends]
    await _wait_end(api, chat_id, run_id)
    return {"viewers": viewers, "cut_ms_p50": common.pct(cut, 50), "cut_ms_p99": common.pct(cut, 99),
            "cut_ms_max": max(cut), "all_cut_before_end": max(ends) - revoked < tokens / rate * 2 / 3}


async def _wait_end(api, chat_id: int, run_id: int) -> None:
    """Until the run ended (the chat takes one reply at a time)."""
    for _ in range(600):
        if (await api.get(f"/api/runs/{run_id}/")).json()["status"] in ("completed", "failed", "cancelled"):
            return
        await asyncio.sleep(0.1)


def stack_url(api: httpx.AsyncClient) -> str:
    return str(api.base_url).rstrip("/")


async def run(stack, url: str, key: str, pids: dict, levels: list[int], tokens: int, rate: float,
              reps: int) -> list[dict]:
    chat_id = (await asyncio.to_thread(stack.make_chats, 1))[0]
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api, \
            sse_client.session(limit=max(levels) + 8) as http:
        share = (await api.post(f"/api/chats/{chat_id}/shares/", json={})).json()
        out = []
        for rep in range(reps):
            for viewers in levels:
                r = await level(stack, api, http, pids, chat_id, share["token"], viewers, tokens, rate)
                r["rep"] = rep
                out.append(r)
                print(f"rep {rep} viewers={viewers}: web {r['us_per_delivered']['web']:.1f} us, redis "
                      f"{r['us_per_delivered']['redis']:.2f} us per delivered token; p99 "
                      f"{report.fmt(r['delay_ms_p99'])} ms; exact text: {r['exact']}", flush=True)
        cut = await revocation(api, http, chat_id, max(levels), tokens, rate)
        print(f"revoked with {cut['viewers']} viewers: cut off after p50 {cut['cut_ms_p50']:.0f} ms, "
              f"p99 {cut['cut_ms_p99']:.0f} ms, max {cut['cut_ms_max']:.0f} ms", flush=True)
        return out, cut


def medians(results: list[dict], levels: list[int]) -> list[dict]:
    out = []
    for viewers in levels:
        rows = [r for r in results if r["viewers"] == viewers]
        med = lambda f: statistics.median(f(r) for r in rows)  # noqa: E731
        out.append({"viewers": viewers, "reps": len(rows),
                    "web_us": med(lambda r: r["us_per_delivered"]["web"]),
                    "redis_us": med(lambda r: r["us_per_delivered"]["redis"]),
                    "web_gen_us": med(lambda r: r["us_per_generated"]["web"]),
                    "redis_gen_us": med(lambda r: r["us_per_generated"]["redis"]),
                    "p50": med(lambda r: r["delay_ms_p50"] or 0), "p99": med(lambda r: r["delay_ms_p99"] or 0),
                    "client_cores": med(lambda r: (r["cpu"]["proc_cpu_s"]["client"] or 0) / r["cpu"]["wall_s"]),
                    "busy_cores": med(lambda r: r["cpu"]["machine_busy_s"] / r["cpu"]["wall_s"]),
                    "exact": all(r["exact"] for r in rows)})
    for row in out:
        base = out[0]["web_us"] + out[0]["redis_us"]
        row["vs_one"] = (row["web_us"] + row["redis_us"]) / base if base else None
    return out


def table(rows: list[dict]) -> str:
    return report.table(
        ["viewers", "web us/delivered token", "redis us/delivered token", "web+redis vs 1 viewer",
         "web us/generated token", "redis us/generated token", "p50 delay ms", "p99 delay ms", "exact text",
         "bench client cores", "machine busy cores"],
        [[r["viewers"], report.fmt(r["web_us"], 1), report.fmt(r["redis_us"], 2), report.fmt(r["vs_one"], 2),
          report.fmt(r["web_gen_us"], 0), report.fmt(r["redis_gen_us"], 1), report.fmt(r["p50"], 1),
          report.fmt(r["p99"], 1), "yes" if r["exact"] else "NO", report.fmt(r["client_cores"], 2),
          report.fmt(r["busy_cores"], 2)] for r in rows])


def plot(rows: list[dict], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    xs = [str(r["viewers"]) for r in rows]
    ax1.bar(xs, [r["web_us"] for r in rows], label="web")
    ax1.bar(xs, [r["redis_us"] for r in rows], bottom=[r["web_us"] for r in rows], label="redis")
    ax1.set_xlabel("viewers of one shared run")
    ax1.set_ylabel("CPU µs per delivered token")
    ax1.legend()
    ax2.plot(xs, [r["p50"] for r in rows], "o-", label="p50")
    ax2.plot(xs, [r["p99"] for r in rows], "o-", label="p99")
    ax2.set_xlabel("viewers of one shared run")
    ax2.set_ylabel("delivery delay, ms (XADD to viewer)")
    ax2.legend()
    fig.suptitle("A shared chat's fan-out (bench.share_fanout)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--viewers", default="1,10,100")
    ap.add_argument("--tokens", type=int, default=600, help="tokens of each run")
    ap.add_argument("--rate", type=float, default=50.0, help="tokens per second the fake engine writes")
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    levels = [int(x) for x in a.viewers.split(",") if x]
    stack = Stack(db_name="bench_share", CHATSITE_SHARE_MAX_STREAMS_PER_LINK=max(levels) + 8)
    try:
        key = stack.seed()
        web, url = stack.start_web()
        worker = stack.start_worker("fake", CHATSITE_ENGINE="fake", CHATSITE_FAKE_STEP_SECONDS=1 / a.rate)
        pids = {"web": web.pid, "redis": stack.server_pids()["redis"], "worker": worker.pid, "client": os.getpid()}
        results, cut = asyncio.run(run(stack, url, key, pids, levels, a.tokens, a.rate, a.reps))
        common.write_json("share_fanout.json", {"levels": results, "revocation": cut})
    finally:
        stack.stop()
    rows = medians(results, levels)
    text = (f"One run of {a.tokens} tokens at {a.rate:.0f} tokens/s (fake engine), followed through its share "
            f"link by N viewers from the stream's start, plus one late joiner halfway; median of {a.reps} reps. "
            f"`{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}`\n\n" + table(rows))
    last = rows[-1]
    verdict = (f"\n\nTarget (at most 10% more web + Redis CPU per delivered token at {last['viewers']} viewers "
               f"than at {rows[0]['viewers']}): {'held' if last['vs_one'] <= 1.10 else 'missed'} "
               f"({last['vs_one']:.2f}x).\n\nThe link revoked a third of the way through a run followed by "
               f"{cut['viewers']} viewers: each viewer's stream ended {cut['cut_ms_p50']:.0f} ms (p50), "
               f"{cut['cut_ms_p99']:.0f} ms (p99), {cut['cut_ms_max']:.0f} ms (max) after the revoke returned"
               f"{'' if cut['all_cut_before_end'] else ' (NOT all before the run ended)'}.")
    (common.OUT / "share_fanout.md").write_text(text + verdict + "\n")
    plot(rows, common.OUT / "share_fanout.png")
    print(text + verdict)


if __name__ == "__main__":
    main()
