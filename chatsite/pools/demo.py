"""The demo setup: a tenant, a user, and the two pools serving the trained demo models."""
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from chatsite.pools.models import ModelPool
from chatsite.tenancy.models import Tenant
from chatsite.tenancy.services import membership_add

DEMO_TENANT = "Demo"
DEMO_USER = "demo"
DEMO_PASSWORD = "demo-password"

# Engine arguments for the demo models on a CPU; every one pinned (see inference.specs).
# The CPU attention backend needs KV blocks in multiples of 32 tokens.
DEMO_ENGINE_ARGS = {"dtype": "float32", "max_num_seqs": 64, "max_num_batched_tokens": 2048, "block_size": 32,
                    "enable_prefix_caching": True, "enable_chunked_prefill": True, "seed": 0}
DEMO_POOLS = {
    "flagship": {"display_name": "Flagship (demo, 4 layers)", "max_output_tokens": 512,
                 "default_sampling": {"temperature": 0.7, "top_p": 0.95, "max_tokens": 200}},
    "small": {"display_name": "Small (demo, 2 layers)", "max_output_tokens": 512,
              "default_sampling": {"temperature": 0.7, "top_p": 0.95, "max_tokens": 200}},
}


def demo_pool_upsert(name: str, *, models_dir=None) -> ModelPool:
    """Create or refresh one demo pool pointing at its trained model folder."""
    spec = DEMO_POOLS[name]
    root = models_dir or settings.CHATSITE["DEMO_MODELS_DIR"]
    pool, _ = ModelPool.objects.update_or_create(name=name, defaults={
        "display_name": spec["display_name"], "model": str(root / name), "engine_args": DEMO_ENGINE_ARGS,
        "default_sampling": spec["default_sampling"], "context_length": 1024,
        "max_output_tokens": spec["max_output_tokens"], "enabled": True,
    })
    return pool


def demo_seed(*, password: str = DEMO_PASSWORD) -> dict:
    """Idempotently create the demo tenant, its user (staff, for the admin) and both pools."""
    with transaction.atomic():
        pools = [demo_pool_upsert(name) for name in DEMO_POOLS]
        tenant, _ = Tenant.objects.get_or_create(name=DEMO_TENANT, defaults={"slug": "demo"})
        user = get_user_model().objects.filter(username=DEMO_USER).first()
        if user is None:
            user = get_user_model().objects.create_user(DEMO_USER, password=password, is_staff=True,
                                                        is_superuser=True)
        membership_add(tenant=tenant, user=user)
    return {"tenant": tenant, "user": user, "pools": pools}
