"""A worker's vLLM engine ends with it (issue 44 item 10), on the real engine: a worker
killed with SIGKILL takes its engine core and model worker with it, and a worker starting
under a dead one's name ends the engine that one left running."""
import json
import os
import signal
import socket
import sys
import time

import psutil
import pytest
from django.conf import settings

from inference.engine_config import TINY_ENGINE_ARGS
from inference.engine_lifetime import engine_processes
from tests import stack
from tests.factories import PoolFactory
from tests.workers.orphan_engine import READY
from workers import runtime

pytestmark = pytest.mark.vllm

POOL = "vllm-lifetime"  # a pool of its own: the session's vLLM worker never takes its runs
NAME = "lifetime"
GONE_WITHIN_SECONDS = 10


def _running(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _gone_within(pids: list[int], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while _running(pids) and time.monotonic() < end:
        time.sleep(0.1)
    return not _running(pids)


def _engine_pids(worker_pid: int) -> list[int]:
    cores, workers = engine_processes(worker_pid)
    assert cores and workers, "a vLLM engine on a CPU has an engine core and a model worker process"
    return [p.pid for p in cores + workers]


@pytest.fixture(scope="module")
def lifetime(stack_env, django_db_blocker, tmp_path_factory):
    """A real engine orphaned by a SIGKILLed predecessor, then a worker started under the
    predecessor's name over its record. Everything started here is ended after the module."""
    record_dir = tmp_path_factory.mktemp("engine-records")
    model = str(settings.CHATSITE["DEMO_MODELS_DIR"] / "flagship")  # the tiny demo model: the quickest start
    with django_db_blocker.unblock():
        PoolFactory(name=POOL, model=model, engine_args=TINY_ENGINE_ARGS)
    env = {**stack_env, "VLLM_CPU_KVCACHE_SPACE": "1", "CHATSITE_ENGINE_RECORD_DIR": str(record_dir)}
    record = runtime.engine_record(f"{NAME}@{socket.gethostname()}").path.name
    started: list[int] = []  # every engine process seen here, ended after the module if still running
    predecessor = worker = None
    try:
        predecessor = stack.Proc("orphan-engine", [sys.executable, "-m", "tests.workers.orphan_engine",
                                                   str(record_dir / record), model], env)
        predecessor.wait_for_log(READY, timeout=300)
        orphans = _engine_pids(predecessor.popen.pid)
        started += orphans
        os.kill(predecessor.popen.pid, signal.SIGKILL)  # the worker alone, as the OOM killer would
        predecessor.popen.wait(10)
        orphans_after_kill = _running(orphans)
        worker = stack.launch_worker(env, pool=POOL, name=NAME)
        yield {"orphans": orphans, "orphans_after_kill": orphans_after_kill, "worker": worker,
               "record": record_dir / record, "started": started}
    finally:
        for proc in (worker, predecessor):
            if proc is not None:
                proc.stop()
        for pid in _running(started):
            os.kill(pid, signal.SIGKILL)
        with django_db_blocker.unblock():
            from chatsite.pools.models import ModelPool

            ModelPool.objects.filter(name=POOL).delete()


def test_a_starting_worker_ends_the_engine_its_dead_predecessor_left_running(lifetime):
    assert lifetime["orphans_after_kill"] == lifetime["orphans"]  # the predecessor left them running
    worker = stack.wait_for_worker(lifetime["worker"], timeout=300)
    lifetime["started"] += _engine_pids(worker.popen.pid)
    assert _gone_within(lifetime["orphans"], GONE_WITHIN_SECONDS)
    assert f"ended a dead predecessor's engine: pids {lifetime['orphans']}" in worker.log_text()  # found running
    recorded = json.loads(lifetime["record"].read_text())
    assert recorded["worker"]["pid"] == worker.popen.pid
    assert sorted(e["pid"] for e in recorded["engine"]) == sorted(_engine_pids(worker.popen.pid))


def test_a_sigkilled_workers_engine_ends_with_it(lifetime):
    worker = stack.wait_for_worker(lifetime["worker"], timeout=300)
    engine = _engine_pids(worker.popen.pid)
    lifetime["started"] += engine
    os.kill(worker.popen.pid, signal.SIGKILL)  # the worker alone, not its process group
    worker.popen.wait(10)
    assert _gone_within(engine, GONE_WITHIN_SECONDS), [psutil.Process(p).cmdline()[0] for p in _running(engine)]
