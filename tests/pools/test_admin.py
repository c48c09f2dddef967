"""The pool's admin page: lever settings, the gate verdict and the KV capacity plan."""
import pytest
from django.contrib.auth import get_user_model

from tests.factories import PoolFactory


@pytest.fixture
def admin_client(client, db):
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-123456789"))
    return client


@pytest.mark.django_db
def test_admin_change_page_shows_the_pool_plan(admin_client, settings):
    pool = PoolFactory(name="plan-me", model=str(settings.CHATSITE["DEMO_MODELS_DIR"] / "flagship"),
                       engine_args={"kv_cache_dtype": "fp8"})
    page = admin_client.get(f"/admin/pools/modelpool/{pool.pk}/change/").content.decode()
    assert "KV per token (fp8): 512 B" in page  # 2 x 4 layers x 2 KV heads x 32 dims x 1 byte
    assert "NVIDIA H100 SXM 80GB" in page and "decode step bandwidth floor" in page


def test_change_page_shows_the_gate_verdict_and_its_reasons(admin_client, settings):
    from chatsite.pools.models import GateStatus
    from workers.quality_gate import gate_record

    base = PoolFactory(name="gate-base", model=str(settings.CHATSITE["DEMO_MODELS_DIR"] / "flagship"))
    pool = PoolFactory(name="gate-fp8", model=base.model, base_pool=base, enabled=False,
                       engine_args={"block_size": 32, "kv_cache_dtype": "fp8"})
    report = {"base": "gate-base", "lossy": ["kv_cache_dtype 'fp8' (base 'auto')"], "exact_match": 0.75,
              "prompts": 16, "token_agreement": 0.8, "base_perplexity": 21.4, "variant_perplexity": 21.5,
              "ppl_increase": 0.0047, "heldout_tokens": 2846, "acceptance_rate": None,
              "mismatches": [{"prompt": "Explain lambda.", "base": "Lambda", "variant": "lambda"}],
              "reasons": ["exact match too low"],
              "seconds": {"base": {"start": 40.0, "greedy": 16.8}, "variant": {"start": 41.0, "greedy": 5.5}}}
    gate_record(pool, status=GateStatus.FAILED, report=report)
    page = admin_client.get(f"/admin/pools/modelpool/{pool.pk}/change/").content.decode()
    assert "failed" in page and "exact match too low" in page and "75.0% of 16" in page
    assert "21.4000 -&gt; 21.5000 (+0.470%" in page and "Explain lambda." in page
    assert "base 16.8 s, variant 5.5 s (3.1x)" in page  # what the variant saves
    listing = admin_client.get("/admin/pools/modelpool/").content.decode()
    assert "KV cache fp8" in listing and "not required" in listing  # the variant's lever; the base needs no gate
