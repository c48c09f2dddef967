"""inference.engine_lifetime without an engine: processes titled as vLLM titles its own
stand in for an engine core and its model worker (tests/workers/test_engine_lifetime.py
does the same with the real engine)."""
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from inference.engine_lifetime import ENGINE_CORE, MODEL_WORKER, EngineRecord, engine_processes
from tests.stack import ROOT

TITLED = "import setproctitle, sys, time; setproctitle.setproctitle(sys.argv[1]); time.sleep(300)"
# A stand-in worker: starts one titled child per argument (an engine core, a model worker), then waits.
WORKER = f"""
import subprocess, sys, time
for title in sys.argv[1:]:
    subprocess.Popen([sys.executable, "-c", {TITLED!r}, title])
time.sleep(300)
"""
# A stand-in worker whose engine core is started by a spawned multiprocessing child that asked to
# die with it, as engine_dies_with_parent() makes vLLM's engine core and model workers do.
DYING_WITH_PARENT = """
import multiprocessing, time
from inference.engine_lifetime import die_with_parent

def core():
    die_with_parent()
    import setproctitle
    setproctitle.setproctitle("VLLM::EngineCore")
    time.sleep(300)

if __name__ == "__main__":
    multiprocessing.get_context("spawn").Process(target=core).start()
    time.sleep(300)
"""


def _running(procs) -> list:
    out = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.NoSuchProcess:
            pass
    return out


def _gone_within(procs, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while _running(procs) and time.monotonic() < end:
        time.sleep(0.05)
    return not _running(procs)


def _engine_of(worker: subprocess.Popen, count: int) -> list:
    end = time.monotonic() + 30
    while time.monotonic() < end:
        cores, workers = engine_processes(worker.pid)
        if len(cores) + len(workers) == count:
            return cores + workers
        time.sleep(0.05)
    raise TimeoutError("the stand-in engine did not start")


@pytest.fixture
def spawned():
    """Every process a test starts here, ended after it (orphans included)."""
    procs: list[psutil.Process] = []
    yield procs
    for proc in _running(procs):
        proc.kill()


def _worker(spawned, *titles) -> tuple[subprocess.Popen, list]:
    worker = subprocess.Popen([sys.executable, "-c", WORKER, *titles])
    spawned.append(psutil.Process(worker.pid))
    engine = _engine_of(worker, len(titles))
    spawned.extend(engine)
    return worker, engine


def _titled(spawned, title: str) -> psutil.Process:
    proc = psutil.Process(subprocess.Popen([sys.executable, "-c", TITLED, title]).pid)
    spawned.append(proc)
    return proc


def test_a_dead_workers_orphaned_engine_is_ended_and_nothing_else(tmp_path, spawned):
    record = EngineRecord(tmp_path / "engine-w@host.json")
    worker, engine = _worker(spawned, ENGINE_CORE, f"{MODEL_WORKER}_TP0")
    record.write(worker_pid=worker.pid)
    another_engine = _worker(spawned, ENGINE_CORE)[1]  # a live worker's, not in the record
    worker.kill()
    worker.wait()
    assert len(_running(engine)) == 2  # orphaned, still running: what a SIGKILLed worker left

    assert sorted(record.clear_predecessor()) == sorted(p.pid for p in engine)
    assert _gone_within(engine, 5)
    assert _running(another_engine) == another_engine
    assert not record.path.exists()
    assert record.clear_predecessor() == []  # a second start finds nothing to do


def test_a_live_workers_engine_is_left_alone(tmp_path, spawned):
    record = EngineRecord(tmp_path / "engine-w@host.json")
    worker, engine = _worker(spawned, ENGINE_CORE)
    record.write(worker_pid=worker.pid)

    assert record.clear_predecessor() == []
    time.sleep(0.3)
    assert _running(engine) == engine


def test_processes_that_are_not_the_recorded_ones_are_left_alone(tmp_path, spawned):
    """A pid reused since (another start time) or a process that is not vLLM's keeps running."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_identity = {"pid": dead.pid, "started": psutil.Process(dead.pid).create_time(), "title": "python"}
    dead.wait()
    reused = _titled(spawned, ENGINE_CORE)
    not_vllm = _titled(spawned, "postgres: checkpointer")
    retitled = _titled(spawned, "python")
    record = EngineRecord(tmp_path / "engine-w@host.json")
    record.path.write_text(json.dumps({"worker": dead_identity, "engine": [
        {"pid": reused.pid, "started": reused.create_time() - 60, "title": ENGINE_CORE},
        {"pid": not_vllm.pid, "started": not_vllm.create_time(), "title": "postgres: checkpointer"},
        {"pid": retitled.pid, "started": retitled.create_time(), "title": ENGINE_CORE},
    ]}))

    assert record.clear_predecessor() == []
    time.sleep(0.3)
    assert _running([reused, not_vllm, retitled]) == [reused, not_vllm, retitled]


def test_an_unreadable_record_is_forgotten(tmp_path):
    record = EngineRecord(tmp_path / "engine-w@host.json")
    record.path.write_text("{not json")
    assert record.clear_predecessor() == []
    assert not record.path.exists()


def test_a_clean_stop_forgets_only_its_own_record(tmp_path, spawned):
    mine, theirs = EngineRecord(tmp_path / "mine.json"), EngineRecord(tmp_path / "theirs.json")
    mine.write()
    theirs.write(worker_pid=_worker(spawned)[0].pid)
    mine.remove()
    theirs.remove()
    assert not mine.path.exists() and theirs.path.exists()


def test_a_record_that_cannot_be_written_or_removed_does_not_stop_a_worker(tmp_path):
    (tmp_path / "not-a-folder").write_text("")
    record = EngineRecord(tmp_path / "not-a-folder" / "engine-w@host.json")
    record.write()  # a read-only disk, say: said in the log, and the worker serves on
    assert record.clear_predecessor() == []
    record.remove()


def test_a_process_that_asked_to_die_with_its_parent_ends_when_the_parent_is_killed(tmp_path, spawned):
    script = tmp_path / "worker.py"  # a file: a spawned child imports its target from the parent's main module
    script.write_text(DYING_WITH_PARENT)
    parent = subprocess.Popen([sys.executable, str(script)], env={**os.environ, "PYTHONPATH": str(ROOT)})
    spawned.append(psutil.Process(parent.pid))
    (core,) = _engine_of(parent, 1)
    spawned.append(core)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert _gone_within([core], 5)
