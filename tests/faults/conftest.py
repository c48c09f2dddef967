"""A stack of its own for fault injection: its own Redis server (with AOF, so a
restart keeps the streams, as a production Redis for streams would), two web
processes, two workers of the pool "faults", and beat sweeping every second."""
import os
import shutil
import subprocess
import tempfile
import time

import pytest
import redis

from tests import stack
from tests.factories import ChatFactory, PoolFactory

POOL = "faults"


class RedisServer:
    def __init__(self):
        self.port = stack.free_port()
        self.dir = tempfile.mkdtemp(prefix="faults-redis-")
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "yes", "--appendfsync", "always", "--dir", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stack.wait_for_redis(redis.Redis.from_url(self.url))

    def stop(self, sig="term"):
        if self.proc.poll() is None:
            self.proc.terminate() if sig == "term" else self.proc.kill()
            self.proc.wait(10)

    def restart_empty(self):
        """Killed and started again with nothing: a Redis without persistence restarting."""
        self.stop("kill")
        shutil.rmtree(self.dir)
        os.mkdir(self.dir)
        self.start()

    def pause(self, seconds: float):
        """Unreachable for a while: the process is stopped, connections hang."""
        import signal

        os.kill(self.proc.pid, signal.SIGSTOP)
        time.sleep(seconds)
        os.kill(self.proc.pid, signal.SIGCONT)


@pytest.fixture(scope="module")
def fault_redis():
    server = RedisServer()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def fault_env(stack_env, fault_redis, django_db_blocker):
    with django_db_blocker.unblock():
        PoolFactory(name=POOL, max_output_tokens=2000, context_length=4096)
    return {**stack_env, "REDIS_URL": fault_redis.url, "CELERY_BROKER_URL": fault_redis.url,
            "CHATSITE_ENGINE": "fake", "CHATSITE_FAKE_STEP_SECONDS": "0.01", "CHATSITE_DRAIN_SECONDS": "1"}


@pytest.fixture(scope="module")
def fault_stack(fault_env):
    # Launched together, waited for in turn: the five processes boot side by side.
    procs = [stack.launch_web(fault_env) for _ in range(2)]
    workers = {name: stack.launch_worker(fault_env, pool=POOL, name=name) for name in ("fa", "fb")}
    beat = stack.launch_beat(fault_env, sweep_seconds=1.0)
    stack.started_together([*procs, *workers.values(), beat],
                           [stack.wait_for_web] * 2 + [stack.wait_for_worker] * 2 + [stack.wait_for_beat])
    webs = [proc.url for proc in procs]
    state = {"webs": webs, "web_procs": procs, "workers": workers, "env": fault_env}
    yield state
    for proc in [*procs, *state["workers"].values(), beat]:
        proc.stop()


@pytest.fixture
def fault_redis_client(fault_redis):
    return redis.Redis.from_url(fault_redis.url, decode_responses=True)


@pytest.fixture
def chat(tenant, user):
    """A chat on the fault stacks' pool (for every fault module: it replaces the session's flagship chat)."""
    return ChatFactory(tenant=tenant, owner=user, pool=PoolFactory(name=POOL, max_output_tokens=2000,
                                                                   context_length=4096))
