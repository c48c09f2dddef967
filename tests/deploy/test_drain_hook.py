"""The preStop hook of a worker pod: `manage.py drain_worker` drains a real worker and
returns once its heartbeat shows no run left; the worker then reports itself unready."""
import socket
import subprocess
import sys
import time

import pytest

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs.models import GenerationRun
from chatsite.runs.admission import run_submit
from tests import stack
from tests.factories import ChatFactory, PoolFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
POOL = "dw-pool"


@pytest.fixture
def draining_worker(stack_env, db):
    PoolFactory(name=POOL, max_output_tokens=2000, context_length=4096)
    proc = stack.start_worker({**stack_env, "CHATSITE_ENGINE": "fake", "CHATSITE_FAKE_STEP_SECONDS": "0.01"},
                              pool=POOL, name="dw")
    yield proc
    proc.stop()


def _manage(stack_env, *args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=stack.ROOT, env=stack_env, capture_output=True,
                          text=True, timeout=timeout)


def test_drain_worker_waits_for_the_hand_back_then_the_worker_is_unready(stack_env, draining_worker, tenant, user):
    name = f"dw@{socket.gethostname()}"  # Celery's -n dw@%h
    run = run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=PoolFactory(name=POOL)), content="long",
                     max_tokens=1500, ignore_eos=True)  # ~15 s on the fake engine
    end = time.monotonic() + 30
    while GenerationRun.objects.get(pk=run.pk).status != "running" and time.monotonic() < end:
        time.sleep(0.1)
    assert _manage(stack_env, "worker_health", "--worker", name, "--max-age", "30").returncode == 0
    started = time.monotonic()
    done = _manage(stack_env, "drain_worker", "--worker", name, "--mode", "finish", "--deadline", "1")
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert f"{name} drained in" in done.stdout and "draining 1 run(s), deadline 1 s" in done.stderr
    assert took < 12  # the run was handed back at the deadline, not finished (it had ~15 s to go)
    beat = get_redis().hgetall(redis_keys.worker_heartbeat(name))
    assert beat["draining"] == "1" and int(float(beat["active_runs"])) == 0
    unready = _manage(stack_env, "worker_health", "--worker", name, "--max-age", "30")
    assert unready.returncode == 1 and "draining" in unready.stderr
    assert GenerationRun.objects.get(pk=run.pk).status != "completed"


def test_drain_worker_of_a_worker_that_is_not_there_exits_0(stack_env):
    done = _manage(stack_env, "drain_worker", "--worker", "nobody@nowhere", "--deadline", "1")
    assert done.returncode == 0 and "did not answer the drain" in done.stderr
