"""Fenced writes: an attempt that lost its run's lease writes nothing more, and stops.

Reproduces the review's finding: two workers of one pool, a 400-token run, the worker
holding it paused (SIGSTOP) past its lease, then resumed. The other worker takes over
(attempt 2); the paused one must not append anything after the takeover, must not
write a second terminal entry, and must stop its engine request at once."""
import signal
import time

import pytest

from chatsite.runs.models import GenerationRun
from chatsite.runs.stream import codec
from tests.faults.client import follow_in_thread
from tests.faults.helpers import assert_nothing_lost, holder_of, post, replace_worker, stream_entries

pytestmark = pytest.mark.django_db(transaction=True)

PAUSE_SECONDS = 12  # the lease is 4 s in tests, the sweep runs every second


def generated_tokens(client, worker: str) -> int:
    """What the worker's engine has generated since it started, from its heartbeat."""
    for name in client.zrange("workers", 0, -1):
        if name.split("@")[0] == worker:
            return int(client.hget(f"worker:{name}", "generated_tokens") or 0)
    raise LookupError(worker)


def test_a_worker_paused_past_its_lease_writes_nothing_after_the_takeover(fault_stack, fault_redis_client, chat,
                                                                          auth, record_property):
    base = fault_stack["webs"][0]
    before = {name: generated_tokens(fault_redis_client, name) for name in fault_stack["workers"]}
    run = post(base, auth, chat.pk, max_tokens=400, ignore_eos=True)  # ~4 s at the fake engine's pace
    thread, box = follow_in_thread(run["events_url"], auth, base_urls=[base], watchdog=60)
    holder = holder_of(run["id"])
    proc = fault_stack["workers"][holder]
    while fault_redis_client.xlen(f"run:{run['id']}") < 20:
        time.sleep(0.005)
    proc.signal(signal.SIGSTOP)
    paused_at = time.monotonic()
    end = paused_at + PAUSE_SECONDS + 10
    while GenerationRun.objects.get(pk=run["id"]).attempt < 2 and time.monotonic() < end:
        time.sleep(0.05)
    taken_over_after = time.monotonic() - paused_at
    time.sleep(max(0.0, PAUSE_SECONDS - taken_over_after))
    proc.signal(signal.SIGCONT)
    thread.join(90)
    assert "error" not in box, box.get("error")
    saved = assert_nothing_lost(fault_redis_client, run["id"], box["result"].text)  # one terminal entry, last
    assert saved.status == "completed" and saved.completion_tokens == 400
    assert saved.attempt == 2 and saved.worker.split("@")[0] != holder
    entries = stream_entries(fault_redis_client, run["id"])
    tokens = [e for e in entries if e.type == codec.TOKEN]
    first_of_attempt_2 = next(i for i, e in enumerate(tokens) if e.attempt == 2)
    late_writes = [e for e in tokens[first_of_attempt_2:] if e.attempt == 1]
    assert late_writes == [], f"the superseded attempt wrote {len(late_writes)} entries after the takeover"
    # Its engine stops at once: what it generated beyond what it wrote (tokens in flight when it
    # was paused, and any it made after waking) is a few engine steps, not the rest of 400
    # (~380 if it ran on to the end). Under CI's load its writer lags further behind its engine.
    time.sleep(2)  # the resumed worker's heartbeats catch up
    written_by_1 = sum(e.n for e in tokens if e.attempt == 1)
    unwritten = generated_tokens(fault_redis_client, holder) - before[holder] - written_by_1
    record_property("takeover_seconds", round(taken_over_after, 2))
    record_property("superseded_unwritten_tokens", unwritten)
    print(f"paused {PAUSE_SECONDS} s: taken over after {taken_over_after:.1f} s; attempt 1 wrote {written_by_1} "
          f"tokens, its engine generated {unwritten} more that were never written; late writes 0")
    assert 0 <= unwritten < 200
    # It learns it from Redis (a stale write, a failed extension) or from its own clock (the lease is lapsing).
    assert any(why in proc.log_text() for why in ("another attempt holds the run", "lease lost", "lapsing"))
    replace_worker(fault_stack, holder)
