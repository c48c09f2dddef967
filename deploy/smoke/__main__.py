"""The compose stack, run: images built here (deploy/images.sh), `compose up` to healthy, a chat
through it with the openai SDK and in Chromium, the flagship worker scaled to two, the container
holding a run killed mid-reply, the Redis container restarted mid-reply. Figures and checks go
to bench/out/deploy_smoke.md; the exit status is 0 only when every check held.

    .venv/bin/python -m deploy.smoke [--no-build] [--keep]

Needs root, Docker (deploy/dockerd.sh starts an engine if none answers, and stops it after),
docker-compose, Chromium. Everything runs on this machine; every wait is bounded."""
import argparse
import signal
import statistics
import subprocess
import sys
import time

import httpx

from deploy.smoke.clients import Saved, browser_chat, follow_events, in_thread, sdk_stream
from deploy.smoke.compose import ROOT, Stack
from deploy.smoke.report import Report

TERMINAL = ("completed", "failed", "cancelled")
LONG = "Write a long story about a lighthouse keeper and the sea."


def bring_up(stack: Stack, report: Report) -> None:
    started = time.monotonic()
    stack.compose("up", "-d", "postgres", "redis", "init", "models", "web", "beat", timeout=900)
    stack.wait({"postgres": "healthy", "redis": "healthy", "init": "exited 0", "models": "exited 0",
                "web": "healthy", "beat": "healthy"}, timeout=1800, say=report.say)
    pools = [p for p in stack.manage("list_pools", "--enabled-names").split() if p in ("flagship", "small")]
    report.say(f"   enabled pools: {pools}")
    workers = [f"worker-{p}" for p in pools]
    stack.compose("up", "-d", *workers, timeout=600)
    stack.wait({w: "healthy" for w in workers}, timeout=900, say=report.say)
    report.figure("first healthy (compose up to every service healthy, models built, engines loaded)",
                  time.monotonic() - started)
    report.check("one worker per enabled pool is healthy", bool(workers), f"{workers}")


def chat_through_the_sdk(stack: Stack, key: str, saved: Saved, report: Report) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key=key, timeout=120, max_retries=0)
    models = [m.id for m in client.models.list().data]
    reply = client.chat.completions.create(model="flagship", max_tokens=32,
                                           messages=[{"role": "user", "content": "What is the capital of France?"}])
    report.check("the SDK's non-streamed chat completion", bool(reply.choices[0].message.content),
                 f"models {models}; reply {reply.choices[0].message.content!r}")
    ttfts = []
    for _ in range(3):
        sent = time.monotonic()
        out = sdk_stream(stack.url, key, "Name three rivers.", max_tokens=24)
        ttfts.append(out.arrivals[0] - sent if out.arrivals else float("nan"))
        run = saved.wait_run(out.run_id, until=lambda r: r["status"] in TERMINAL, timeout=60)
        report.check("a streamed SDK reply equals the saved one", out.error is None and out.text == run["content"],
                     f"run {out.run_id}: {out.text!r}")
    report.figure("first token through the stack (SDK stream, first request)", ttfts[0])
    report.figure("first token through the stack (median of 3)", statistics.median(ttfts))


def chat_in_the_browser(stack: Stack, saved: Saved, report: Report) -> None:
    started = time.monotonic()
    shown = browser_chat(stack.url, "Say hello in one sentence.")
    run = saved.run(shown["run_id"])
    report.check("Chromium: sign in, send, the reply shown equals the saved one",
                 shown["status"] == "completed" and shown["text"] == run["content"] and bool(run["content"]),
                 f"run {shown['run_id']}: {shown['text']!r} in {time.monotonic() - started:.1f} s")


def scale_flagship(stack: Stack, report: Report) -> None:
    started = time.monotonic()
    stack.compose("up", "-d", "--no-recreate", "--scale", "worker-flagship=2", "worker-flagship", timeout=300)
    stack.wait({"worker-flagship": "healthy"}, timeout=900, say=report.say)
    count = len(stack.containers("worker-flagship"))
    report.check("the flagship worker scaled to two, both healthy", count == 2, f"{count} containers")
    report.figure("second flagship worker: scale to healthy", time.monotonic() - started)


def kill_the_holder(stack: Stack, key: str, saved: Saved, report: Report) -> int:
    thread, out = in_thread(sdk_stream, stack.url, key, LONG, max_tokens=400, ignore_eos=True)
    end = time.monotonic() + 120
    while (out.run_id is None or len(out.arrivals) < 20) and out.error is None and time.monotonic() < end:
        time.sleep(0.05)
    run = saved.wait_run(out.run_id, until=lambda r: r["worker"] and r["status"] == "running", timeout=60)
    container = stack.container_of_worker(run["worker"])
    tokens_before = len(out.arrivals)
    killed = time.monotonic()
    subprocess.run(["docker", "kill", container], check=True, capture_output=True, timeout=30)
    thread.join(300)
    final = saved.wait_run(out.run_id, until=lambda r: r["status"] in TERMINAL, timeout=120)
    terminal = saved.terminal_entries(out.run_id)
    report.check("docker kill of the container holding a run mid-reply: the SDK client's text equals the saved "
                 "reply, one terminal entry, finished by the other worker",
                 out.error is None and final["status"] == "completed" and out.text == final["content"]
                 and terminal == 1 and final["attempt"] >= 2 and final["worker"] != run["worker"],
                 f"run {out.run_id}: killed {run['worker']} after {tokens_before} chunks; {final['status']} by "
                 f"{final['worker']} (attempt {final['attempt']}), {final['completion_tokens']} tokens, "
                 f"{terminal} terminal entry, client error {out.error}")
    report.figure("kill mid-reply: the client's longest wait between tokens", out.longest_gap())
    report.figure("kill mid-reply: kill to the reply's end", (out.arrivals[-1] if out.arrivals else killed) - killed)
    return out.run_id


def restart_redis(stack: Stack, key: str, saved: Saved, earlier_run: int, report: Report) -> None:
    auth = {"Authorization": f"Bearer {key}"}
    chat = httpx.post(f"{stack.url}/api/chats/", headers=auth, json={"model": "flagship"}, timeout=30).json()
    posted = httpx.post(f"{stack.url}/api/chats/{chat['id']}/messages/", headers=auth, timeout=30,
                        json={"content": LONG, "max_tokens": 400, "ignore_eos": True})
    run = posted.json()["run"]
    kept_before = len(saved.entries(earlier_run))
    thread, out = in_thread(follow_events, stack.url, key, run["events_url"])
    end = time.monotonic() + 120
    while len(out.arrivals) < 20 and out.error is None and time.monotonic() < end:
        time.sleep(0.05)
    tokens_before = len(out.arrivals)
    started = time.monotonic()
    stack.compose("restart", "redis", timeout=120)
    stack.wait({"redis": "healthy"}, timeout=120, say=report.say)
    report.figure("Redis container restart (stop, start, healthy)", time.monotonic() - started)
    thread.join(300)
    final = saved.wait_run(run["id"], until=lambda r: r["status"] in TERMINAL, timeout=120)
    terminal = saved.terminal_entries(run["id"])
    kept_after = len(saved.entries(earlier_run))
    report.check("Redis restarted mid-reply: the client's text equals the saved reply, one terminal entry, "
                 "an earlier run's stream kept (AOF)",
                 out.error is None and final["status"] == "completed" and out.text == final["content"]
                 and terminal == 1 and kept_after == kept_before > 0,
                 f"run {run['id']}: restart after {tokens_before} events; {final['status']}, "
                 f"{final['completion_tokens']} tokens, {terminal} terminal entry, {out.reconnects} reconnects; "
                 f"run {earlier_run}'s stream {kept_before} -> {kept_after} entries")


def still_healthy(stack: Stack, report: Report) -> None:
    """After all that, every long-running service is healthy again (beat's check needs its
    schedule written within 5 minutes: a stack up for half an hour proves it is kept)."""
    services = {"postgres": "healthy", "redis": "healthy", "web": "healthy", "beat": "healthy"}
    stack.wait(services, timeout=180, say=report.say)
    workers = stack.state("worker-flagship")
    report.check("at the end every service is healthy (the killed worker's container stays down)",
                 "healthy" in workers, f"{services}, worker-flagship: {workers}")


def engine_up(report: Report) -> bool:
    """Start an engine with deploy/dockerd.sh when none answers; True when this run started it."""
    if subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0:
        return False
    done = subprocess.run([str(ROOT / "deploy/dockerd.sh"), "start"], capture_output=True, text=True, timeout=120)
    report.say(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError("could not start a Docker engine")
    return True


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true", help="use the images built already")
    parser.add_argument("--keep", action="store_true", help="leave the stack running (docker-compose -p chatsite-smoke ...)")
    parser.add_argument("--out", default=str(ROOT / "bench/out/deploy_smoke.md"))
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped smoke still takes its stack down
    report = Report()
    started_engine = engine_up(report)
    report.engine_version()
    stack = Stack()
    try:
        if not args.no_build:
            started = time.monotonic()
            subprocess.run([str(ROOT / "deploy/images.sh")], check=True, timeout=3600)
            report.figure("build (deploy/images.sh: bases when missing, wheelhouse, web and worker images)",
                          time.monotonic() - started)
        report.images((ROOT / "var/log/images.md").read_text() if (ROOT / "var/log/images.md").exists() else "")
        bring_up(stack, report)
        key = stack.manage("create_api_key", "--user", "demo", "--tenant", "demo", "--name", "smoke").split()[-1]
        saved = Saved(pg_host=stack.ip("postgres"), pg_password=stack.env["POSTGRES_PASSWORD"],
                      redis_host=stack.ip("redis"))
        chat_through_the_sdk(stack, key, saved, report)
        chat_in_the_browser(stack, saved, report)
        scale_flagship(stack, report)
        killed_run = kill_the_holder(stack, key, saved, report)
        restart_redis(stack, key, saved, killed_run, report)
        still_healthy(stack, report)
    except Exception as exc:  # the report says where it stopped
        report.check("the smoke ran to its end", False, f"{type(exc).__name__}: {exc}"[:3000])
    finally:
        if not args.keep:
            stack.down()
        if started_engine:
            done = subprocess.run([str(ROOT / "deploy/dockerd.sh"), "stop"], capture_output=True, text=True, timeout=120)
            report.check("the engine stopped and the host's firewall is as it was before it started",
                         done.returncode == 0, (done.stdout + done.stderr).strip())
        report.write(args.out)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
