"""`manage.py list_pools` and `manage.py worker_health` (the container health check)."""
import io
import json
import re
import socket
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from tests.factories import PoolFactory
from tests.heartbeat import beat
from tests.stack import ROOT

pytestmark = pytest.mark.django_db


def test_list_pools_shows_each_pool_and_its_live_workers():
    PoolFactory(name="lp-busy", min_replicas=1, max_replicas=4)
    PoolFactory(name="lp-idle", queue_when_cold=True, min_replicas=0)
    beat("lp-busy-1@host", "lp-busy", running=3, kv_cache_usage=0.42, tokens_per_second=88.5)
    beat("lp-busy-2@host", "lp-busy", ready=False)
    beat("lp-busy-3@host", "lp-busy", age=30)  # long silent: not listed
    out = io.StringIO()
    call_command("list_pools", "--json", stdout=out)
    pools = {p["pool"]: p for p in json.loads(out.getvalue())}
    busy = pools["lp-busy"]
    assert [w["worker"] for w in busy["workers"]] == ["lp-busy-1@host", "lp-busy-2@host"]
    first = busy["workers"][0]
    assert (first["ready"], first["draining"], first["running"], first["kv_cache_usage"]) == (True, False, 3.0, 0.42)
    assert pools["lp-idle"]["workers"] == [] and pools["lp-idle"]["queue_when_cold"] is True
    text = io.StringIO()
    call_command("list_pools", stdout=text)
    lines = text.getvalue().splitlines()
    assert "lp-busy (cpu): 2 live, 1 ready; replicas 1..4, recommended -" in lines
    assert any(line.startswith("  lp-busy-1@host: ready, 3 running") and "KV 42%" in line for line in lines)
    assert "lp-idle (cpu, queues when cold): 0 live, 0 ready; replicas 0..8, recommended -" in lines


def test_list_pools_enabled_names_lists_only_the_pools_that_serve():
    PoolFactory(name="en-b")
    PoolFactory(name="en-a")
    PoolFactory(name="en-off", enabled=False)
    out = io.StringIO()
    call_command("list_pools", "--enabled-names", stdout=out)
    names = [n for n in out.getvalue().splitlines() if n.startswith("en-")]
    assert names == ["en-a", "en-b"]


def _health(stack_env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", "worker_health", *args], cwd=ROOT, env=stack_env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_worker_health_exits_0_only_on_a_fresh_ready_heartbeat(stack_env):
    # --max-age 30, and a beat just before each check (the hash expires 10 s after a beat, as the
    # heartbeat's does): a loaded machine may take seconds to start the command.
    this_host = f"wh-a@{socket.gethostname()}"
    beat(this_host, "wh-pool", ready=False)
    loading = _health(stack_env, "--worker", "wh-a@%h", "--max-age", "30")
    assert loading.returncode == 1 and "the engine is still loading" in loading.stderr
    beat(this_host, "wh-pool", ready=False)
    assert _health(stack_env, "--worker", "wh-a@%h", "--live", "--max-age", "30").returncode == 0  # alive, loading
    beat(this_host, "wh-pool")
    ready = _health(stack_env, "--worker", "wh-a@%h", "--max-age", "30")
    assert ready.returncode == 0 and ready.stdout.strip() == f"worker {this_host}: ready"
    beat(this_host, "wh-pool", age=5)  # its hash lives on 10 s after the write, as a real one does
    stale = _health(stack_env, "--worker", this_host)
    assert stale.returncode == 1 and re.search(r"last heartbeat \d+\.\d s ago \(more than 3 s\)", stale.stderr)
    missing = _health(stack_env, "--worker", "nobody@nowhere")
    assert missing.returncode == 1 and "no heartbeat" in missing.stderr


def test_worker_health_of_a_pool_is_any_ready_worker():
    beat("wh-b1@host", "wh-pool-b", ready=False)
    beat("wh-b0@host", "wh-pool-b", age=60)  # long gone: not a candidate
    with pytest.raises(CommandError, match="pool wh-pool-b: the engine is still loading"):
        call_command("worker_health", "--pool", "wh-pool-b")
    beat("wh-b2@host", "wh-pool-b")
    out = io.StringIO()
    call_command("worker_health", "--pool", "wh-pool-b", stdout=out)
    assert out.getvalue().strip() == "pool wh-pool-b: ready"
    with pytest.raises(CommandError, match="pool wh-none: no live worker"):
        call_command("worker_health", "--pool", "wh-none")


def test_point_pool_checks_as_the_admin_does_and_saves_only_without_check(tmp_path):
    pool = PoolFactory(name="pp-pool")
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "config.json").write_text(json.dumps({"max_position_embeddings": 4096}))
    out = io.StringIO()
    call_command("point_pool", "--pool", "pp-pool", "--model", str(weights), "--device", "gpu", "--context-length",
                 "4096", "--engine-args", '{"dtype": "bfloat16"}', "--check", stdout=out)
    assert "pp-pool.device: 'cpu' -> 'gpu'" in out.getvalue() and "nothing saved" in out.getvalue()
    pool.refresh_from_db()
    assert pool.device == "cpu"
    call_command("point_pool", "--pool", "pp-pool", "--model", str(weights), "--device", "gpu", "--context-length",
                 "4096", "--engine-args", '{"dtype": "bfloat16"}', stdout=io.StringIO())
    pool.refresh_from_db()
    assert (pool.model, pool.device, pool.context_length, pool.engine_args) == (
        str(weights), "gpu", 4096, {"dtype": "bfloat16"})
    with pytest.raises(CommandError, match="context_length: context length 8192 is longer than the model's"):
        call_command("point_pool", "--pool", "pp-pool", "--model", str(weights), "--context-length", "8192")
    with pytest.raises(CommandError, match="tensor_parallel_size 2 needs distributed_executor_backend 'mp'"):
        call_command("point_pool", "--pool", "pp-pool", "--model", str(weights), "--engine-args",
                     '{"tensor_parallel_size": 2}')
    with pytest.raises(CommandError, match="no pool named 'nope'"):
        call_command("point_pool", "--pool", "nope", "--model", str(weights))
