"""Reads for model pools, always through the tenant asking."""
from chatsite.errors import InvalidInput, ModelUnavailable
from chatsite.pools.models import ModelPool


def pools_for_tenant(tenant):
    """The enabled pools a tenant may use (all enabled ones if it has no list)."""
    pools = ModelPool.objects.filter(enabled=True)
    if tenant.allowed_pools.exists():
        pools = pools.filter(pk__in=tenant.allowed_pools.values("pk"))
    return pools.order_by("name")


def pool_for_tenant(tenant, name: str) -> ModelPool:
    """The pool `name` for this tenant. Raises InvalidInput for an unknown model or
    one the tenant may not use, ModelUnavailable for a disabled one."""
    pool = ModelPool.objects.filter(name=name).first() if isinstance(name, str) else None
    allowed = pool is not None and (not tenant.allowed_pools.exists() or tenant.allowed_pools.filter(pk=pool.pk).exists())
    if not allowed:
        raise InvalidInput(f"unknown model {name!r}; GET /api/models/ lists the models you can use",
                           field="model", code="model_not_found")
    if not pool.enabled:
        raise ModelUnavailable(f"the model {name!r} is disabled right now; pick another model", field="model")
    return pool
