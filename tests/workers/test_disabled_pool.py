"""A worker of a disabled pool loads no engine until the pool is enabled (workers/runtime.py):
a variant whose quality gate failed holds no memory or cores, and serves once enabled."""
import socket
import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from chatsite import redis_keys
from chatsite.pools.models import ModelPool
from chatsite.redis_client import get_redis
from tests import stack
from tests.factories import PoolFactory

pytestmark = pytest.mark.django_db(transaction=True)

WAITING = "pool dormant is disabled: its engine is not loaded until the pool is enabled"


def _launch(stack_env, name: str):
    env = {**stack_env, "CHATSITE_ENGINE": "fake", "CHATSITE_FAKE_STEP_SECONDS": "0.01",
           "CHATSITE_ENABLED_POLL_SECONDS": "0.5", "CHATSITE_HEARTBEAT_SECONDS": "0.2"}
    proc = stack.launch_worker(env, pool="dormant", name=name)
    proc.wait_for_log(WAITING, timeout=60)
    return proc, f"{name}@{socket.gethostname()}"


def _beat(worker: str) -> dict:
    end = time.monotonic() + 10
    while not (beat := get_redis().hgetall(redis_keys.worker_heartbeat(worker))):
        assert time.monotonic() < end, f"no heartbeat from {worker}"
        time.sleep(0.1)
    return beat


def test_it_waits_alive_and_not_ready_then_loads_the_engine_once_enabled(stack_env):
    pool = PoolFactory(name="dormant", enabled=False)
    proc, worker = _launch(stack_env, "dormant-1")
    try:
        beat = _beat(worker)
        assert beat["ready"] == "0" and beat["disabled"] == "1"  # alive (liveness probes pass), not taking work
        listed = StringIO()
        call_command("list_pools", stdout=listed)
        assert f"{worker}: disabled (no engine loaded until its pool is enabled)" in listed.getvalue()
        with pytest.raises(CommandError, match="its pool is disabled: no engine is loaded until the pool is enabled"):
            call_command("worker_health", worker=worker, stdout=StringIO())
        call_command("worker_health", worker=worker, live=True, stdout=StringIO())  # a liveness probe passes
        time.sleep(1.5)  # three looks at the row
        assert "starting the engine" not in proc.log_text()
        ModelPool.objects.filter(pk=pool.pk).update(enabled=True)
        stack.wait_for_worker(proc, timeout=60)
        proc.wait_for_log("pool dormant is enabled", timeout=5)
        proc.wait_for_log("engine ready", timeout=30)
        end = time.monotonic() + 10
        while _beat(worker)["ready"] != "1":
            assert time.monotonic() < end, "the worker never said it is ready"
            time.sleep(0.1)
        assert _beat(worker)["disabled"] == "0"
        call_command("worker_health", worker=worker, stdout=StringIO())
    finally:
        proc.stop()


def test_sigterm_stops_a_worker_that_is_waiting(stack_env):
    PoolFactory(name="dormant", enabled=False)
    proc, _ = _launch(stack_env, "dormant-2")
    started = time.monotonic()
    proc.stop(timeout=20)
    assert proc.popen.returncode == 0 and time.monotonic() - started < 20, proc.log_text()[-2000:]
    assert "starting the engine" not in proc.log_text()
