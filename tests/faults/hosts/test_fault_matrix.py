"""The fault matrix across hosts (issue 13, item 9): one host cut off while the others run.

Each test is one row: it measures the run it hit into a `matrix.Row` (printed and
written to bench/out/fault_matrix.md at the module's end), then asserts it: nothing
lost, nothing twice, one terminal entry and last, no write by a superseded attempt
after the takeover. Runs are 200-300 tokens at 10 ms a token; the lease is 4 s."""
import re
import signal
import time
from datetime import datetime

import httpx
import pytest

from chatsite.chats.models import Message
from chatsite.runs.models import GenerationRun
from tests.faults.client import follow_in_thread
from tests.faults.helpers import stream_entries
from tests.faults.hosts.conftest import WORKERS
from tests.faults.hosts.matrix import Row, written_positions

pytestmark = pytest.mark.django_db(transaction=True)

CUT_SECONDS = 10  # past the 4 s lease, the sweep's second and a takeover's start
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
    for name in client.zrange("workers", 0, -1):
        if name.split("@")[0] == worker:
            return client.hgetall(f"worker:{name}")
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


def assert_row(row: Row, *, runs: int = 1) -> None:
    assert row.runs == runs
    assert row.lost == 0 and row.duplicates == 0 and row.text_mismatches == 0
    assert row.terminal_ok == runs
    assert row.late_writes == 0


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


def takeover_row(fault: str, hosts_stack, hosts_redis, chat, auth, fault_matrix, *, tokens: int, cut, heal) -> Row:
    """Rows a and b: the holder of a run is cut off past its lease, then back.
    Tokens its engine generated after the takeover: exact when it stopped before the
    takeover (its counter at the end minus its counter at the stop); else bounded by
    what it generated and never wrote (it wrote nothing after the takeover)."""
    before = {name: generated_tokens(hosts_redis, name) for name in WORKERS}
    run, thread, box = start(hosts_stack, auth, chat, tokens=tokens)
    holder = holder_of(run["id"])
    wait_until(lambda: streamed(hosts_redis, run["id"]) >= 20, 20, "20 tokens")
    cut(holder)
    cut_at = time.monotonic()
    wait_until(lambda: GenerationRun.objects.get(pk=run["id"]).attempt >= 2, CUT_SECONDS + 10, "takeover")
    taken_over_after = time.monotonic() - cut_at
    time.sleep(max(0.0, CUT_SECONDS - taken_over_after))
    healed_at = time.time()
    heal(holder)
    followed = finish(thread, box)
    row = Row(fault)
    saved = row.add_run(hosts_redis, run["id"], followed, requested=tokens)
    beating_since(hosts_redis, holder, healed_at)  # its engine's counter, once it is back
    final = generated_tokens(hosts_redis, holder)
    written = written_positions(stream_entries(hosts_redis, run["id"]), 1)
    unwritten = final - before[holder] - written
    takeover_at = takeover_not_before(hosts_stack["workers"], run["id"])
    stop = wait_until(lambda: superseded_stop(hosts_stack["workers"][holder], run["id"]), 20, "attempt 1's stop")
    stopped_before = stop[0] <= takeover_at
    row.superseded_tokens = final - stop[1] if stopped_before else f"<={unwritten}"
    row.note = (f"{tokens} tokens; attempt 1 wrote {written}, its engine made {unwritten} more; it stopped "
                f"{stop[0] - takeover_at:+.1f} s from the sweep's takeover ({taken_over_after:.1f} s after the cut)")
    fault_matrix.append(row)
    print(f"\n{row}")
    assert_row(row)
    assert saved.status == "completed" and saved.completion_tokens == tokens and saved.attempt == 2
    assert saved.worker.split("@")[0] != holder
    assert unwritten >= 0
    return row


def test_a_worker_host_partitioned_from_redis_and_postgres_past_its_lease(hosts_stack, hosts_redis, chat, auth,
                                                                          fault_matrix):
    topo = hosts_stack["topology"]
    row = takeover_row(f"a. worker host partitioned {CUT_SECONDS} s, healed", hosts_stack, hosts_redis, chat, auth,
                       fault_matrix, tokens=1000, cut=lambda w: topo.cut(WORKERS[w]),
                       heal=lambda w: topo.heal(WORKERS[w]))
    # Cut off from Redis, it cannot be told of the takeover: it stops its engine by its own clock
    # once its lease has lapsed, which is before another attempt can take the run.
    assert isinstance(row.superseded_tokens, int) and row.superseded_tokens < 40


def test_b_worker_paused_past_its_lease_then_resumed(hosts_stack, hosts_redis, chat, auth, fault_matrix):
    workers = hosts_stack["workers"]
    row = takeover_row(f"b. worker paused (SIGSTOP) {CUT_SECONDS} s, resumed", hosts_stack, hosts_redis, chat, auth,
                       fault_matrix, tokens=300, cut=lambda w: workers[w].signal(signal.SIGSTOP),
                       heal=lambda w: workers[w].signal(signal.SIGCONT))
    assert int(str(row.superseded_tokens).lstrip("<=")) < 40  # in flight at the pause: a few engine steps


def test_c_web_host_partitioned_mid_stream_client_resumes_on_the_other_web(hosts_stack, hosts_redis, chat, auth,
                                                                          fault_matrix):
    topo = hosts_stack["topology"]
    run, thread, box = start(hosts_stack, auth, chat, web=0, tokens=200)
    wait_until(lambda: streamed(hosts_redis, run["id"]) >= 40, 20, "40 tokens")
    topo.cut("web0")
    try:
        followed = finish(thread, box)
    finally:
        topo.heal("web0")
    row = Row("c. web host partitioned mid-stream")
    saved = row.add_run(hosts_redis, run["id"], followed, requested=200)
    row.note = f"{followed.reconnects} reconnect(s) with Last-Event-ID to web1; read timeout {READ_TIMEOUT} s"
    fault_matrix.append(row)
    print(f"\n{row}")
    assert_row(row)
    assert saved.status == "completed" and saved.completion_tokens == 200 and saved.attempt == 1
    assert followed.reconnects >= 1


def task_outcomes(proc) -> list[str]:
    """What each generate_run task of a worker returned, from its log."""
    return re.findall(r"generate_run\[[^\]]+\] succeeded in [\d.]+s: '(\w+)'", proc.log_text())


def test_d_postgres_partitioned_from_a_worker_while_it_finalizes(hosts_stack, hosts_redis, chat, auth, fault_matrix):
    topo = hosts_stack["topology"]
    pg_addr = topo["svc"].addrs[1]
    run, thread, box = start(hosts_stack, auth, chat, tokens=200)
    holder = holder_of(run["id"])
    proc = hosts_stack["workers"][holder]
    done_before = len(task_outcomes(proc))
    wait_until(lambda: streamed(hosts_redis, run["id"]) >= 150, 20, "150 tokens")
    topo.blackhole(WORKERS[holder], pg_addr)
    cut_at = time.monotonic()
    try:
        followed = finish(thread, box)  # the stream ends: Redis is still reachable
        saved_after = wait_until(lambda: GenerationRun.objects.get(pk=run["id"]).is_terminal and
                                 time.monotonic() - cut_at, 30, "the run saved")
        time.sleep(max(0.0, CUT_SECONDS - (time.monotonic() - cut_at)))
        assert len(task_outcomes(proc)) == done_before, "the worker's task ended while Postgres was cut off"
    finally:
        topo.unblackhole(WORKERS[holder], pg_addr)
    healed_at = time.monotonic()
    row = Row(f"d. Postgres partitioned from the finalizing worker {CUT_SECONDS} s")
    saved = row.add_run(hosts_redis, run["id"], followed, requested=200)
    # After the heal the worker's own finalize goes through (a no-op by then): the run is saved once.
    wait_until(lambda: len(task_outcomes(proc)) > done_before, 40, "the worker's task to end after the heal")
    back_after = time.monotonic() - healed_at
    row.note = (f"saved by the sweep {saved_after:.1f} s after the cut; the worker's own finalize returned "
                f"{back_after:.1f} s after the heal")
    fault_matrix.append(row)
    print(f"\n{row}")
    assert_row(row)
    assert saved.status == "completed" and saved.completion_tokens == 200 and saved.attempt == 1
    assert task_outcomes(proc)[done_before] == "finished"
    assert Message.objects.filter(chat_id=chat.pk).count() == 2  # the question and one reply
    assert GenerationRun.objects.get(pk=run["id"]).assistant_message.content == saved.assistant_message.content
