"""Reads for model pools, always through the tenant asking."""
import re

from chatsite.errors import InvalidInput
from chatsite.pools.models import ModelPool

POOL_NAME_PATTERN = r"^[-a-zA-Z0-9_]{1,50}$"  # pool names are slugs: anything else (NUL, huge strings) names none
_SLUG = re.compile(POOL_NAME_PATTERN)


def plausible_pool_name(name) -> bool:
    return isinstance(name, str) and _SLUG.fullmatch(name) is not None


def pools_for_tenant(tenant, allowed: frozenset | None = None):
    """The enabled pools a tenant may use (all enabled ones if it has no list). `allowed`:
    the tenant's list, when the caller read it already (a credential's read)."""
    pools = ModelPool.objects.filter(enabled=True)
    if allowed is None:
        allowed = allowed_pool_ids(tenant)
    if allowed:
        pools = pools.filter(pk__in=allowed)
    return pools.order_by("name")


def allowed_pool_ids(tenant) -> frozenset:
    """The pools the tenant is limited to (empty: every enabled pool)."""
    return frozenset(tenant.allowed_pools.values_list("pk", flat=True))


def pool_for_tenant(tenant, name: str, *, loaded: ModelPool | None = None) -> ModelPool:
    """The pool `name` for this tenant. Raises InvalidInput for an unknown model or
    one the tenant may not use (code model_not_found) and for a disabled one
    (code model_disabled): both are the client's to fix by picking another model.
    `loaded`: the pool row if the caller already has it (a chat's own pool)."""
    if loaded is not None and loaded.name == name:
        pool = loaded
    else:
        pool = ModelPool.objects.filter(name=name).first() if plausible_pool_name(name) else None
    return pool_checked(name, pool, allowed_pool_ids(tenant))


def pool_checked(name, pool: ModelPool | None, allowed: frozenset) -> ModelPool:
    """`pool` (the row named `name`, None when there is none) if a tenant limited to
    `allowed` (empty: every pool) may use it now; else pool_for_tenant's InvalidInput."""
    if pool is None or (allowed and pool.pk not in allowed):
        shown = repr(name if not isinstance(name, str) or len(name) <= 60 else name[:60] + "...")
        raise InvalidInput(f"unknown model {shown}; GET /api/models/ lists the models you can use",
                           field="model", code="model_not_found")
    if not pool.enabled:
        raise InvalidInput(f"the model {name!r} is disabled right now; pick another model from GET /api/models/",
                           field="model", code="model_disabled")
    return pool
