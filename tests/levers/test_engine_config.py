"""Engine settings a worker could not start are refused when the pool is saved (and
again by the worker's own check), with the reason; good lever settings pass both."""
import json
import shutil

import pytest
from django.core.exceptions import ValidationError

from chatsite.pools.demo import DEMO_ENGINE_ARGS
from chatsite.pools.engine_config import ENGINE_ARG_DEFAULTS, engine_config_problems
from chatsite.pools.models import GateStatus, ModelPool
from inference.specs import DEFAULT_ENGINE_ARGS, EngineSpec, EngineSpecError
from tests.factories import PoolFactory
from workers.quality_gate import gate_record


@pytest.fixture(scope="module")
def models(django_db_blocker):
    from django.conf import settings

    return settings.CHATSITE["DEMO_MODELS_DIR"]


@pytest.fixture
def foreign_draft(models, tmp_path):
    """The small model's folder with a tokenizer whose ids mean other text (two tokens swapped)."""
    draft = tmp_path / "foreign-draft"
    shutil.copytree(models / "small", draft)
    data = json.loads((draft / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[100:102]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (draft / "tokenizer.json").write_text(json.dumps(data))
    return draft


NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}


def _draft(path):
    return {"method": "draft_model", "model": str(path), "num_speculative_tokens": 4}


# (case, overrides, context_length, device, field blamed, words in the reason, the worker re-checks it too)
BAD = [
    ("cpu block size", {"block_size": 16}, 1024, "cpu", "engine_args", "multiple of 32", True),
    ("context past the window", {}, 2048, "cpu", "context_length", "max_position_embeddings (1024)", True),
    ("unknown scheme", {"quantization": "int3_magic", "dtype": "bfloat16"}, 1024, "cpu", "engine_args",
     "unknown quantization scheme", False),
    ("gpu-only scheme on cpu", {"quantization": "fp8", "dtype": "bfloat16"}, 1024, "cpu", "engine_args",
     "accepted only for GPU pools", True),
    ("unmeasured scheme on cpu", {"quantization": "awq", "dtype": "bfloat16"}, 1024, "cpu", "engine_args",
     "not among the schemes that run on the CPU build", True),
    ("quantization over float32", {"quantization": "fp8_per_channel"}, 1024, "cpu", "engine_args",
     "needs dtype bfloat16 or float16", True),
    ("moe-only scheme on a dense model", {"quantization": "int8_per_channel_weight_only", "dtype": "bfloat16"},
     1024, "cpu", "engine_args", "quantizes only MoE expert layers", False),
    ("awq without an awq checkpoint", {"quantization": "awq", "dtype": "bfloat16"}, 1024, "gpu", "engine_args",
     "no quantization_config", False),
    ("no chunking, budget below context", {"enable_chunked_prefill": False, "max_num_batched_tokens": 512}, 1024,
     "cpu", "engine_args", "without chunked prefill", False),
    ("unknown kv dtype", {"kv_cache_dtype": "fp4"}, 1024, "cpu", "engine_args", "kv_cache_dtype 'fp4'", False),
    ("ngram lookup backwards", {"speculative_config": {**NGRAM, "prompt_lookup_min": 5}}, 1024, "cpu",
     "engine_args", "prompt_lookup_min <= prompt_lookup_max", False),
    ("zero speculative tokens", {"speculative_config": {**NGRAM, "num_speculative_tokens": 0}}, 1024, "cpu",
     "engine_args", "num_speculative_tokens must be", False),
    ("unknown speculation method", {"speculative_config": {"method": "telepathy"}}, 1024, "cpu", "engine_args",
     "method 'ngram' or 'draft_model'", False),
    ("unknown engine argument", {"max_batch": 3}, 1024, "cpu", "engine_args", "unknown engine argument", False),
    ("tensor parallel in one process", {"tensor_parallel_size": 2}, 1024, "gpu", "engine_args",
     "needs distributed_executor_backend 'mp'", True),
    ("unknown executor", {"distributed_executor_backend": "ray-ish"}, 1024, "cpu", "engine_args",
     "must be 'uni' or 'mp'", False),
]
GOOD = [
    ("demo", {}),
    ("ngram", {"speculative_config": NGRAM}),
    ("fp8 kv", {"kv_cache_dtype": "fp8"}),
    ("fp8 weights", {"dtype": "bfloat16", "quantization": "fp8_per_channel"}),
    ("small chunked-prefill budget", {"max_num_batched_tokens": 128, "max_num_seqs": 16}),
]


def test_the_web_tier_mirrors_the_pinned_engine_defaults():
    assert ENGINE_ARG_DEFAULTS == DEFAULT_ENGINE_ARGS


@pytest.mark.parametrize("case,overrides,context,device,field,reason,worker", BAD, ids=[b[0] for b in BAD])
def test_bad_settings_are_refused_with_the_reason(models, case, overrides, context, device, field, reason, worker):
    problems = engine_config_problems(model=str(models / "flagship"), context_length=context,
                                      engine_args={**DEMO_ENGINE_ARGS, **overrides}, device=device)
    assert any(p.field == field and reason in p.message for p in problems), problems
    if worker:
        with pytest.raises(EngineSpecError, match="cannot start"):
            EngineSpec.build(pool="x", model=str(models / "flagship"), context_length=context,
                             engine_args={**DEMO_ENGINE_ARGS, **overrides}, device=device)


@pytest.mark.parametrize("case,overrides", GOOD, ids=[g[0] for g in GOOD])
def test_good_lever_settings_pass_both_checks(models, case, overrides):
    args = {**DEMO_ENGINE_ARGS, **overrides}
    assert engine_config_problems(model=str(models / "flagship"), context_length=1024, engine_args=args,
                                  device="cpu") == []
    spec = EngineSpec.build(pool="x", model=str(models / "flagship"), context_length=1024, engine_args=args,
                            device="cpu")
    assert spec.args["block_size"] == 32


def test_the_small_model_may_draft_for_the_flagship_but_a_foreign_tokenizer_may_not(models, foreign_draft):
    ok = {**DEMO_ENGINE_ARGS, "speculative_config": _draft(models / "small")}
    assert engine_config_problems(model=str(models / "flagship"), context_length=1024, engine_args=ok,
                                  device="cpu") == []
    EngineSpec.build(pool="x", model=str(models / "flagship"), context_length=1024, engine_args=ok, device="cpu")
    bad = {**DEMO_ENGINE_ARGS, "speculative_config": _draft(foreign_draft)}
    problems = engine_config_problems(model=str(models / "flagship"), context_length=1024, engine_args=bad,
                                      device="cpu")
    assert [p.field for p in problems] == ["engine_args"] and "another tokenizer" in problems[0].message
    with pytest.raises(EngineSpecError, match="another tokenizer"):
        EngineSpec.build(pool="x", model=str(models / "flagship"), context_length=1024, engine_args=bad,
                         device="cpu")


def test_a_gpu_pool_may_ask_for_what_only_gpus_run(models):
    args = {**DEMO_ENGINE_ARGS, "block_size": 16, "quantization": "fp8", "dtype": "bfloat16"}
    assert engine_config_problems(model=str(models / "flagship"), context_length=1024, engine_args=args,
                                  device="gpu") == []


@pytest.mark.django_db
def test_clean_blames_the_field_and_a_variant_needs_a_base(models):
    pool = PoolFactory.build(name="bad", model=str(models / "flagship"), context_length=4096, enabled=False,
                             engine_args={**DEMO_ENGINE_ARGS, "kv_cache_dtype": "fp8"})
    with pytest.raises(ValidationError) as err:
        pool.full_clean()
    assert "max_position_embeddings (1024)" in err.value.message_dict["context_length"][0]
    assert "KV cache fp8" in err.value.message_dict["base_pool"][0]


@pytest.mark.django_db
def test_a_variant_is_enabled_only_after_its_gate_passed_for_this_configuration(models):
    base = PoolFactory(name="base", model=str(models / "flagship"), engine_args=DEMO_ENGINE_ARGS)
    variant = PoolFactory(name="variant", model=str(models / "flagship"), base_pool=base, enabled=False,
                          engine_args={**DEMO_ENGINE_ARGS, "speculative_config": NGRAM})
    variant.full_clean()  # disabled: may be saved to run its gate
    variant.enabled = True
    with pytest.raises(ValidationError, match="quality gate"):
        variant.full_clean()
    gate_record(variant, status=GateStatus.FAILED, report={"reasons": ["x"]})
    with pytest.raises(ValidationError, match="gate: failed"):
        variant.full_clean()
    gate_record(variant, status=GateStatus.PASSED, report={})
    variant.full_clean()
    variant.engine_args = {**variant.engine_args, "kv_cache_dtype": "fp8"}  # a verdict about another config
    assert variant.gate_verdict == "not checked"
    with pytest.raises(ValidationError, match="gate: not checked"):
        variant.full_clean()


@pytest.mark.django_db
def test_the_admin_refuses_the_save_and_says_why(client, models):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_superuser("root", password="pw-123456789"))
    form = {"name": "cpu16", "display_name": "x", "model": str(models / "flagship"), "device": "cpu",
            "context_length": 1024, "max_output_tokens": 64, "default_sampling": "{}",
            "engine_args": json.dumps({**DEMO_ENGINE_ARGS, "block_size": 16}), "gate_max_ppl_increase": 0.02,
            "gate_min_exact_match": 0.9, "max_queued_runs": 10, "max_queue_wait_seconds": 60, "ttft_slo_ms": 2000,
            "min_replicas": 1, "max_replicas": 2, "replica_warmup_seconds": 60}
    resp = client.post("/admin/pools/modelpool/add/", form)
    assert resp.status_code == 200 and "not a multiple of 32" in resp.content.decode()
    assert not ModelPool.objects.filter(name="cpu16").exists()
    resp = client.post("/admin/pools/modelpool/add/", {**form, "engine_args": json.dumps(DEMO_ENGINE_ARGS)})
    assert resp.status_code == 302 and ModelPool.objects.filter(name="cpu16").exists()


def test_what_makes_a_variant_lossy_counts_an_unset_key_as_its_pinned_default(models):
    from workers.quality_gate import lossy_differences

    base = ModelPool(name="b", model=str(models / "flagship"), engine_args={"block_size": 32})
    same = ModelPool(name="v", model=base.model, engine_args={"block_size": 64, "kv_cache_dtype": "auto",
                                                              "dtype": "float32", "speculative_config": NGRAM})
    assert lossy_differences(same, base) == []  # scheduling and speculation only
    fp8 = ModelPool(name="f", model=base.model, engine_args={"kv_cache_dtype": "fp8"})
    assert lossy_differences(fp8, base) == ["kv_cache_dtype 'fp8' (base 'auto')"]
