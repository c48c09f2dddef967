"""The quality gate on real engines: speculation must leave every greedy reply
unchanged; a lossy variant is judged by the operator's tolerance on real figures."""

import pytest
from django.core.management import call_command

from inference.engine_config import FP8_KV_CPU_FLAGS, TINY_ENGINE_ARGS
from inference.specs import cpu_flags
from chatsite.pools.models import GateStatus, ModelPool
from tests.factories import PoolFactory
from workers.quality_gate import Tolerance, judge, lossy_differences

NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
# Lossy without FP8 weights: on a CPU without FP8 units vLLM emulates FP8 matmuls in PyTorch
# (ChannelWiseTorchFP8ScaledMMLinearKernel), which made this one test take ~6 min.
# vLLM's CPU build has an FP8 KV cache only on x86 with AVX-512 or AMX; an AVX2 machine refuses
# it at engine start, and there bfloat16 alone gave the same greedy replies as float32 (no loss).
LOSSY = {"dtype": "bfloat16", "kv_cache_dtype": "fp8"}
FP8_KV_ON_CPU = bool(FP8_KV_CPU_FLAGS & (cpu_flags() or frozenset()))


@pytest.fixture
def base(db, settings):
    return PoolFactory(name="gate-base", model=str(settings.CHATSITE["DEMO_MODELS_DIR"] / "flagship"),
                       engine_args=TINY_ENGINE_ARGS)


def _variant(base, name, **overrides):
    pool = PoolFactory(name=name, model=base.model, base_pool=base, enabled=False,
                       engine_args={**TINY_ENGINE_ARGS, **overrides})
    pool.full_clean()  # the settings a worker would accept
    return pool


def _gate(*args) -> int:
    try:
        call_command("quality_gate", *args)
    except SystemExit as exc:
        return exc.code
    return 0


@pytest.mark.vllm
@pytest.mark.timeout(1200)
def test_ngram_speculation_passes_with_identical_greedy_replies(base):
    pool = _variant(base, "gate-ngram", speculative_config=NGRAM)
    assert _gate("--pool", pool.name, "--enable") == 0
    pool.refresh_from_db()
    r = pool.gate_report
    assert pool.gate_status == GateStatus.PASSED and pool.gate_verdict == "passed" and pool.enabled
    assert r["lossy"] == [] and r["exact_match"] == 1.0 and r["mismatch_count"] == 0
    assert r["draft_tokens"] > 0  # the engine really speculated
    assert 0 <= r["accepted_tokens"] <= r["draft_tokens"]
    pool.full_clean()  # enabled, and the verdict is about this very configuration


@pytest.mark.vllm
@pytest.mark.timeout(1200)
def test_the_small_model_drafting_for_the_flagship_passes_identical_greedy(base, settings):
    draft = {"method": "draft_model", "model": str(settings.CHATSITE["DEMO_MODELS_DIR"] / "small"),
             "num_speculative_tokens": 3}
    pool = _variant(base, "gate-draft", speculative_config=draft)
    assert _gate("--pool", pool.name) == 0
    pool.refresh_from_db()
    assert pool.gate_status == GateStatus.PASSED and pool.gate_report["exact_match"] == 1.0
    assert pool.gate_report["draft_tokens"] > 0 and pool.gate_report["accepted_tokens"] > 0


@pytest.mark.vllm
@pytest.mark.timeout(1200)
@pytest.mark.skipif(not FP8_KV_ON_CPU, reason="this CPU has no AVX-512 or AMX: vLLM's CPU build has no FP8 KV cache")
def test_a_lossy_variant_fails_a_tiny_tolerance_and_passes_a_loose_one_on_the_same_figures(base):
    pool = _variant(base, "gate-lossy", **LOSSY)
    assert _gate("--pool", pool.name, "--max-ppl-increase", "0", "--min-exact-match", "1") == 1
    pool.refresh_from_db()
    measured = pool.gate_report
    assert pool.gate_status == GateStatus.FAILED and measured["reasons"]
    assert "dtype 'bfloat16' (base 'float32')" in measured["lossy"]
    # real figures: the variant's numbers differ from the base's
    assert measured["variant_perplexity"] != measured["base_perplexity"] or measured["exact_match"] < 1
    loose = ["--max-ppl-increase", str(max(0.0, measured["ppl_increase"]) + 0.05), "--min-exact-match",
             str(max(0.0, measured["exact_match"] - 0.1))]
    assert _gate("--pool", pool.name, "--rejudge", *loose) == 0
    pool = ModelPool.objects.get(pk=pool.pk)
    assert pool.gate_status == GateStatus.PASSED and pool.gate_report["reasons"] == []
    assert pool.gate_report["variant_perplexity"] == measured["variant_perplexity"]  # judged, not re-measured
    pool.engine_args = {**pool.engine_args, "kv_cache_dtype": "fp8_e5m2"}  # another configuration
    assert pool.gate_verdict == "not checked"


def test_a_lossless_variant_must_match_exactly_whatever_the_tolerance():
    figures = {"exact_match": 15 / 16, "mismatch_count": 1, "prompts": 16, "ppl_increase": 0.0,
               "base_perplexity": 9.0, "variant_perplexity": 9.0}
    status, reasons = judge(figures, lossy=[], tolerance=Tolerance(max_ppl_increase=1.0, min_exact_match=0.0))
    assert status == GateStatus.FAILED and "must not change any" in reasons[0]
    status, _ = judge(figures, lossy=["quantization x"], tolerance=Tolerance(1.0, 0.9))
    assert status == GateStatus.PASSED
    status, reasons = judge({**figures, "ppl_increase": 0.03, "variant_perplexity": 9.27}, lossy=["x"],
                            tolerance=Tolerance(0.02, 0.9))
    assert status == GateStatus.FAILED and "perplexity rose +3.000%" in reasons[0]


def test_what_makes_a_variant_lossy_counts_an_unset_key_as_its_pinned_default(settings):
    models = settings.CHATSITE["DEMO_MODELS_DIR"]
    base = ModelPool(name="b", model=str(models / "flagship"), engine_args={"block_size": 32})
    same = ModelPool(name="v", model=base.model, engine_args={"block_size": 64, "kv_cache_dtype": "auto",
                                                              "dtype": "float32", "speculative_config": NGRAM})
    assert lossy_differences(same, base) == []  # scheduling and speculation only
    fp8 = ModelPool(name="f", model=base.model, engine_args={"kv_cache_dtype": "fp8"})
    assert lossy_differences(fp8, base) == ["kv_cache_dtype 'fp8' (base 'auto')"]
