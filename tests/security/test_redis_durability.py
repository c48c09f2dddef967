"""Run streams survive a Redis restart when setup starts Redis, and the platform
says whether the Redis it uses would: in the web's and the workers' logs at
start, on /healthz, and as the chatsite_redis_persistent gauge.

The shared test Redis (6379) is not restarted here: services.sh starts Redis
servers of its own on free ports, in temporary folders."""
import os
import subprocess
import time

import httpx
import pytest
import redis

from chatsite.redis_client import get_redis
from chatsite.redis_durability import redis_persistence
from tests import stack

pytestmark = pytest.mark.django_db


def _services(port: int, folder, **extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update({"DATABASE_URL": "postgres://unused", "CHATSITE_REDIS_PORT": str(port),
                "CHATSITE_REDIS_DIR": str(folder), "CHATSITE_REDIS_LOG": str(folder / "redis.log"), **extra})
    return subprocess.run(["scripts/services.sh"], cwd=stack.ROOT, env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def own_redis(tmp_path):
    started = []

    def start(port=None):
        port = port or stack.free_port()
        out = _services(port, tmp_path)
        assert out.returncode == 0, out.stdout + out.stderr
        client = redis.Redis(port=port, decode_responses=True)
        started.append(client)
        return port, client, out.stdout

    yield start
    for client in started:
        try:
            client.shutdown(nosave=True)
        except redis.ConnectionError:
            pass


@pytest.mark.slow
def test_setup_starts_redis_with_aof_and_streams_survive_a_restart(own_redis):
    port, client, said = own_redis()
    assert "starting Redis (AOF, appendfsync everysec" in said
    assert client.config_get("appendonly") == {"appendonly": "yes"}
    assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
    state = redis_persistence(client)
    assert state.persistent and state.aof and "appendfsync everysec" in state.detail
    entry = client.xadd("run:1", {"type": "token", "seq": 0, "n": 1, "text": "kept"})
    time.sleep(1.5)  # everysec: on disk within a second
    try:
        client.shutdown(nosave=True)  # as a crash would: no final save
    except redis.ConnectionError:
        pass
    _, again, _ = own_redis(port)
    assert [e[0] for e in again.xrange("run:1")] == [entry]


@pytest.mark.slow
def test_a_redis_that_keeps_nothing_is_reported_as_such(tmp_path):
    port = stack.free_port()
    subprocess.run(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--daemonize", "yes",
                    "--dir", str(tmp_path)], check=True, timeout=30)
    client = redis.Redis(port=port, decode_responses=True)
    try:
        stack.wait_for_redis(client)
        state = redis_persistence(client)
        assert not state.persistent and state.detail == "AOF off, no RDB snapshots"
        client.config_set("save", "900 1")
        assert redis_persistence(client).persistent  # RDB snapshots alone count, with their window
    finally:
        client.shutdown(nosave=True)


def _truth() -> bool:
    r = get_redis()
    return r.config_get("appendonly")["appendonly"] == "yes" or bool(r.config_get("save")["save"].strip())


def test_the_web_and_workers_say_at_start_and_healthz_and_metrics_say_too(live_url, fake_workers):
    persistent = _truth()  # whatever the shared test Redis was started with
    health = httpx.get(f"{live_url}/healthz", timeout=10).json()
    assert health["ok"] is True and health["redis_persistent"] is persistent and health["redis_persistence"]
    metrics = httpx.get(f"{live_url}/metrics", timeout=30).text
    assert f"chatsite_redis_persistent {int(persistent)}" in metrics.splitlines()
    said = "persists them" if persistent else "does not persist them"
    web_log = (stack.LOG_DIR / f"web-{live_url.rsplit(':', 1)[1]}.log").read_text()
    assert f"web: the Redis holding run streams {said}" in web_log
    for worker in fake_workers:
        assert "the Redis holding run streams " + said in worker.log_text(), worker.name
