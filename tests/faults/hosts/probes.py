"""What the fault-matrix rows read: the API as a client uses it, the hosts' Redis and
Postgres, and the workers' own logs (a worker cut off from Redis can tell nothing else)."""
import re
import time
from datetime import datetime

import httpx

from chatsite import redis_keys
from chatsite.runs.models import GenerationRun
from tests.faults.client import follow_in_thread
from tests.faults.helpers import stream_entries

READ_TIMEOUT = 4  # the client trusts a silent connection this long (keep-alives come every 2 s)


def post(base, auth, chat_id, **body) -> dict:
    resp = httpx.post(f"{base}/api/chats/{chat_id}/messages/", headers=auth,
                      json={"content": "Tell me about loops.", **body}, timeout=30)
    assert resp.status_code == 202, resp.text
    return resp.json()["run"]


def wait_until(predicate, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if value := predicate():
            return value
        time.sleep(0.02)
    raise TimeoutError(f"no {what} after {timeout} s")


def holder_of(run_id) -> str:
    def running():
        run = GenerationRun.objects.get(pk=run_id)
        return run.worker.split("@")[0] if run.worker and run.status == "running" else None
    return wait_until(running, 20, f"worker holding run {run_id}")


def streamed(client, run_id) -> int:
    """How many tokens the run's stream holds so far."""
    last = [e for e in stream_entries(client, run_id) if e.seq or e.n]
    return max((e.seq + e.n for e in last), default=0)


def heartbeat(client, worker: str) -> dict:
    for name in client.zrange(redis_keys.workers_index(), 0, -1):
        if name.split("@")[0] == worker:
            return client.hgetall(redis_keys.worker_heartbeat(name))
    return {}


def generated_tokens(client, worker: str) -> int:
    return int(heartbeat(client, worker).get("generated_tokens") or 0)


def beating_since(client, worker: str, since: float, timeout: float = 40) -> None:
    wait_until(lambda: float(heartbeat(client, worker).get("ts") or 0) > since, timeout, f"heartbeat of {worker}")


def start(hosts_stack, auth, chat, *, web: int = 0, tokens: int):
    base = hosts_stack["webs"][web]
    run = post(base, auth, chat.pk, max_tokens=tokens, ignore_eos=True)
    thread, box = follow_in_thread(run["events_url"], auth, base_urls=hosts_stack["webs"][web:] +
                                   hosts_stack["webs"][:web], watchdog=60, read_timeout=READ_TIMEOUT)
    return run, thread, box


def finish(thread, box):
    thread.join(90)
    assert "error" not in box, box.get("error")
    return box["result"]


def _log_time(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def superseded_stop(proc, run_id: int) -> tuple[float, int] | None:
    """When (epoch seconds) the worker stopped attempt 1 of the run, and its engine's
    token counter then, from its log line."""
    m = re.search(rf"^(\S+ \S+) WARNING workers.generation: run {run_id} attempt 1 superseded after \d+ tokens; "
                  r"nothing more written \(engine total (\d+) tokens\)", proc.log_text(), re.M)
    return None if m is None else (_log_time(m.group(1)), int(m.group(2)))


def takeover_not_before(workers, run_id: int) -> float:
    """A time the takeover cannot precede: the sweep's first "no live attempt" for the
    run (it saw the lease gone; attempt 2 was dispatched after it, then claimed)."""
    stamps = [_log_time(m) for proc in workers.values() for m in re.findall(
        rf"^(\S+ \S+) WARNING chatsite.runs.services.sweep: run {run_id} \(running\) has no live attempt",
        proc.log_text(), re.M)]
    return min(stamps)


def task_outcomes(proc) -> list[str]:
    """What each generate_run task of a worker returned, from its log."""
    return re.findall(r"generate_run\[[^\]]+\] succeeded in [\d.]+s: '(\w+)'", proc.log_text())


def failed_sweeps(proc) -> int:
    """How many beat sweeps a worker ran and failed (the sweep runs on any worker)."""
    return len(re.findall(r"sweep_runs\[[^\]]+\] raised unexpected", proc.log_text()))
