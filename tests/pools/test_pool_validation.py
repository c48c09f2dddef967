"""A pool is validated when it is saved (model clean, the admin) by inference.engine_config;
a variant serves only after its quality gate passed for its current configuration."""
import json

import pytest
from django.core.exceptions import ValidationError

from chatsite.pools.models import GateStatus, ModelPool
from inference.engine_config import TINY_ENGINE_ARGS as DEMO_ENGINE_ARGS
from tests.factories import PoolFactory
from workers.quality_gate import gate_record

NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}


@pytest.fixture
def models(settings):
    return settings.CHATSITE["DEMO_MODELS_DIR"]


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


@pytest.mark.django_db
def test_a_chat_template_the_pool_names_must_be_readable_and_decides_whether_it_takes_tools(tmp_path):
    from chatsite.pools.tokens import pool_takes_tools

    pool = PoolFactory.build(name="templated", chat_template="missing.jinja", engine_args=DEMO_ENGINE_ARGS)
    with pytest.raises(ValidationError) as err:
        pool.full_clean()
    assert "missing.jinja" in err.value.message_dict["chat_template"][0]
    assert not pool_takes_tools(pool)
    pool.chat_template = "smollm2-tools.jinja"  # shipped in inference/chat_templates
    pool.full_clean()
    assert pool_takes_tools(pool)
    plain = tmp_path / "plain.jinja"
    plain.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    pool.chat_template = str(plain)
    pool.full_clean()
    assert not pool_takes_tools(pool)


@pytest.mark.django_db
def test_the_demo_pools_take_tools_through_the_shipped_template(models):
    from chatsite.pools.demo import demo_pool_upsert
    from chatsite.pools.tokens import chat_template_has_tools, pool_takes_tools

    if not (models / "smollm2-135m-instruct" / "config.json").is_file():
        pytest.skip("the real model is not built here (scripts/setup.sh builds it)")
    pool = demo_pool_upsert("flagship")
    assert pool.chat_template == "smollm2-tools.jinja" and pool_takes_tools(pool)
    assert not chat_template_has_tools(pool.model)  # the model's own template has none
