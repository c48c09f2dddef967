"""`make run`'s stack (scripts/run.sh past its setup, on the fake engine and the test database):
with no REDIS_URL it runs a Redis of its own with an append-only file, and /healthz says so;
every process is supervised, so a killed worker comes back and takes work while the web answers
all along; stopping the stack stops all of it, its Redis too. And the web and the workers
refuse a Redis that persists nothing unless CHATSITE_ALLOW_VOLATILE_REDIS=1 says so."""
import os
import signal
import socket
import subprocess
import time

import httpx
import pytest
import redis

from tests import stack
from tests.factories import ChatFactory, PoolFactory
from tests.runs.helpers import post_message, wait_terminal

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]  # scripts/run.sh's whole stack, started per test


def _until(what: str, check, timeout: float, proc: stack.Proc):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if (value := check()) is not None:
            return value
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited ({proc.popen.returncode}):\n{proc.log_text()[-4000:]}")
        time.sleep(0.2)
    raise TimeoutError(f"{what} after {timeout} s:\n{proc.log_text()[-4000:]}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def run_stack(stack_env, tmp_path):
    """scripts/run.sh started as `make run` starts it, minus setup; yields what the test reads."""
    PoolFactory(name="flagship")  # the one enabled pool: run.sh starts web, beat and a flagship worker
    env = {k: v for k, v in stack_env.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    ports = {"web": stack.free_port(), "redis": stack.free_port()}
    env.update({"CHATSITE_SKIP_SETUP": "1", "CHATSITE_ENGINE": "fake", "CHATSITE_FAKE_STEP_SECONDS": "0.01",
                "CHATSITE_ALLOW_VOLATILE_REDIS": "0", "CHATSITE_PORT": str(ports["web"]),
                "CHATSITE_OWN_REDIS_PORT": str(ports["redis"]), "CHATSITE_OWN_REDIS_DIR": str(tmp_path / "redis"),
                "CHATSITE_RUN_DIR": str(tmp_path / "run"), "CHATSITE_RUN_LOG_DIR": str(tmp_path / "log"),
                "CHATSITE_VAR_DIR": str(tmp_path / "var")})
    (tmp_path / "var").mkdir()
    proc = stack.Proc("run-stack", ["scripts/run.sh"], env)
    url = f"http://127.0.0.1:{ports['web']}"
    try:
        yield {"proc": proc, "url": url, "redis_port": ports["redis"], "tmp": tmp_path,
               "redis_url": f"redis://127.0.0.1:{ports['redis']}/0"}
    finally:
        proc.stop(timeout=90)


def _healthz(url: str) -> dict | None:
    try:
        resp = httpx.get(f"{url}/healthz", timeout=2)
    except httpx.HTTPError:
        return None
    return resp.json() if resp.status_code == 200 else None


def _worker_pid(tmp_path, since_pid: int | None = None) -> int | None:
    done = subprocess.run([".venv/bin/supervisorctl", "-c", str(tmp_path / "run" / "supervisord.conf"), "pid",
                           "flagship"], cwd=stack.ROOT, capture_output=True, text=True, timeout=20)
    pid = int(done.stdout.strip()) if done.stdout.strip().isdigit() else 0
    return pid if pid and pid != since_pid else None


def test_make_run_keeps_serving_when_a_worker_dies_on_a_redis_of_its_own(run_stack, user, tenant, auth):
    proc, url, tmp = run_stack["proc"], run_stack["url"], run_stack["tmp"]
    health = _until("no /healthz", lambda: _healthz(url), 60, proc)
    # 1) its own Redis, with an append-only file under the stack's folder
    assert health["redis_persistent"] is True, health
    own = redis.Redis(port=run_stack["redis_port"], decode_responses=True)
    assert own.config_get("appendonly") == {"appendonly": "yes"}
    assert own.config_get("appendfsync") == {"appendfsync": "everysec"}
    assert own.config_get("dir")["dir"] == str(tmp / "redis")
    worker_name = f"flagship@{socket.gethostname()}"
    stack.wait_for_heartbeat(proc, run_stack["redis_url"], worker_name, since=0, timeout=60)
    assert "Every process is supervised: one that exits is started again" in proc.log_text()

    # 2) SIGKILL the worker: supervisord says so and starts another; the web answers meanwhile
    first = _until("no worker pid", lambda: _worker_pid(tmp), 30, proc)
    killed_at = time.time()
    os.kill(first, signal.SIGKILL)
    assert _healthz(url) is not None
    second = _until("no new worker", lambda: _worker_pid(tmp, since_pid=first), 60, proc)
    stack.wait_for_heartbeat(proc, run_stack["redis_url"], worker_name, since=killed_at, timeout=60)
    assert _healthz(url) is not None
    assert "exited: flagship (terminated by SIGKILL; not expected)" in proc.log_text()

    # 3) the new worker takes a run to its end
    chat = ChatFactory(tenant=tenant, owner=user, pool=PoolFactory(name="flagship"))
    run = post_message(url, auth, chat.pk)
    done = wait_terminal(run["id"], timeout=60)
    assert done.status == "completed" and done.assistant_message.content, done.status

    # 4) stopping the stack stops every process and its Redis
    programs = [second, own.info("server")["process_id"]]
    proc.stop(timeout=90)
    assert proc.popen.returncode is not None
    _until_gone = time.monotonic() + 10
    while any(_alive(pid) for pid in programs) and time.monotonic() < _until_gone:
        time.sleep(0.2)
    assert not [pid for pid in programs if _alive(pid)]
    with pytest.raises(redis.ConnectionError):
        own.ping()
    assert any((tmp / "redis").rglob("*.aof")), "no append-only file"


@pytest.fixture
def volatile_redis(tmp_path):
    port = stack.free_port()
    subprocess.run(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                    "--daemonize", "yes", "--dir", str(tmp_path)], check=True, timeout=30)
    client = redis.Redis(port=port)
    stack.wait_for_redis(client)
    yield f"redis://127.0.0.1:{port}/0"
    client.shutdown(nosave=True)


def _exits(proc: stack.Proc, timeout: float = 60) -> int:
    try:
        return proc.popen.wait(timeout)
    finally:
        proc.stop(timeout=10)


@pytest.mark.parametrize("role", ["web", "worker"])
def test_a_redis_that_persists_nothing_is_refused_unless_the_operator_says_so(stack_env, volatile_redis, role):
    env = {**stack_env, "REDIS_URL": volatile_redis, "CELERY_BROKER_URL": volatile_redis, "CHATSITE_ENGINE": "fake",
           "CHATSITE_ALLOW_VOLATILE_REDIS": "0"}
    PoolFactory(name="flagship")
    launch = (lambda e: stack.launch_web(e)) if role == "web" else \
        (lambda e: stack.launch_worker(e, pool="flagship", name=f"volatile-{os.getpid()}"))
    refused = launch(env)
    assert _exits(refused) != 0
    said = refused.log_text()
    assert "refusing to start: the Redis holding run streams does not persist them" in said
    assert "CHATSITE_ALLOW_VOLATILE_REDIS=1" in said

    allowed = launch({**env, "CHATSITE_ALLOW_VOLATILE_REDIS": "1"})
    try:
        if role == "web":
            _, url = stack.wait_for_web(allowed)
            assert httpx.get(f"{url}/healthz", timeout=5).json()["redis_persistent"] is False
        else:
            stack.wait_for_worker(allowed)
        assert "running anyway, as CHATSITE_ALLOW_VOLATILE_REDIS=1 allows" in allowed.log_text()
    finally:
        allowed.stop()
