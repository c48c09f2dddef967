"""Drain without waiting: a worker drained with runs in flight hands each to the pool's
other worker at a token boundary; every reply ends finished there, each client's text
equal to the saved reply, no token twice, and the drained worker holds nothing at once."""
import socket
import subprocess
import sys
import time
from collections import Counter

import pytest

from chatsite import redis_keys
from chatsite.runs.models import GenerationRun
from tests import stack
from tests.factories import ChatFactory, PoolFactory
from tests.faults.client import follow_in_thread
from tests.faults.conftest import POOL
from tests.faults.helpers import assert_nothing_lost, post, replace_worker

pytestmark = pytest.mark.django_db(transaction=True)

RUNS, TOKENS = 6, 2000  # ~20 s a reply on the fake engine at 10 ms a step


def client_tokens(result) -> Counter:
    """How many times the client was sent each token position (seq)."""
    seen: Counter = Counter()
    for ev in result.events:
        if ev.event == "token":
            seen.update(range(ev.data["seq"], ev.data["seq"] + ev.data["n"]))
    return seen


def running_on(run_ids) -> Counter:
    return Counter(r.worker.split("@")[0] for r in GenerationRun.objects.filter(pk__in=run_ids, status="running"))


def test_a_drain_hands_every_run_over_at_once(fault_stack, fault_redis_client, tenant, user, auth):
    pool = PoolFactory(name=POOL, max_output_tokens=2000, context_length=4096)
    base = fault_stack["webs"][0]
    runs = [post(base, auth, ChatFactory(tenant=tenant, owner=user, pool=pool).pk, max_tokens=TOKENS,
                 ignore_eos=True) for _ in range(RUNS)]
    ids = [r["id"] for r in runs]
    followers = [follow_in_thread(r["events_url"], auth, base_urls=fault_stack["webs"], watchdog=30) for r in runs]
    end = time.monotonic() + 20
    while sum(running_on(ids).values()) < RUNS and time.monotonic() < end:
        time.sleep(0.05)
    holder, held = running_on(ids).most_common(1)[0]
    moved = [pk for pk in ids if GenerationRun.objects.get(pk=pk).worker.split("@")[0] == holder]
    assert held == len(moved) >= 1
    # mid-reply: every run the holder took has streamed some tokens (its writer holds it), not only been claimed
    end = time.monotonic() + 10
    while time.monotonic() < end and not all(
            fault_redis_client.xlen(redis_keys.run_stream(pk)) >= 3 for pk in moved):
        time.sleep(0.05)

    name = f"{holder}@{socket.gethostname()}"
    drained = subprocess.run([sys.executable, "manage.py", "drain_worker", "--worker", name], cwd=stack.ROOT,
                             env=fault_stack["env"], capture_output=True, text=True, timeout=60)
    assert drained.returncode == 0, drained.stderr
    assert f"draining {held} run(s), handing them over now" in drained.stderr
    # the hook returned once the worker held no run: its runs were handed over, not waited for
    # (each had seconds still to go), and none is left on it
    print(drained.stdout.strip())
    at_return = GenerationRun.objects.filter(pk__in=moved)
    assert not at_return.filter(status="completed").exists()
    assert not at_return.filter(status="running", worker=name).exists()

    for thread, box in followers:
        thread.join(60)
        assert "error" not in box, box.get("error")
    for run_id, (_, box) in zip(ids, followers):
        result = box["result"]
        saved = assert_nothing_lost(fault_redis_client, run_id, result.text)
        assert saved.status == "completed" and saved.completion_tokens == TOKENS
        seen = client_tokens(result)
        assert sorted(seen) == list(range(TOKENS)) and max(seen.values()) == 1  # none lost, none twice
        if run_id in moved:
            assert saved.attempt == 2 and saved.worker.split("@")[0] != holder
    assert f"{name} drained in" in drained.stdout
    replace_worker(fault_stack, holder)
