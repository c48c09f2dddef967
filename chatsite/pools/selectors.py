"""Reads for model pools, always through the tenant asking."""
import re

from chatsite.errors import InvalidInput
from chatsite.pools.models import ModelPool
from chatsite.rows import Columns, fetch_one, prepared

_SLUG = re.compile(r"[-a-zA-Z0-9_]{1,50}")
POOL_COLUMNS = _POOL = Columns(ModelPool, "p")
_POOL_BY_NAME = prepared(
    f'SELECT {_POOL.sql} FROM "{_POOL.table}" p WHERE p.name = %s')  # plain SQL: chatsite/rows.py


def plausible_pool_name(name) -> bool:
    """Pool names are slugs: anything else (NUL bytes, huge strings) cannot name one."""
    return isinstance(name, str) and _SLUG.fullmatch(name) is not None


def pools_for_tenant(tenant):
    """The enabled pools a tenant may use (all enabled ones if it has no list)."""
    pools = ModelPool.objects.filter(enabled=True)
    if allowed := allowed_pool_ids(tenant):
        pools = pools.filter(pk__in=allowed)
    return pools.order_by("name")


def allowed_pool_ids(tenant) -> frozenset:
    """The pools the tenant is limited to (empty: every enabled pool); as the request's
    authentication read them, if it did."""
    preloaded = getattr(tenant, "preloaded", None)
    if preloaded is not None:
        return preloaded.allowed_pool_ids
    return frozenset(tenant.allowed_pools.values_list("pk", flat=True))


def pool_for_tenant(tenant, name: str, *, loaded: ModelPool | None = None) -> ModelPool:
    """The pool `name` for this tenant. Raises InvalidInput for an unknown model or
    one the tenant may not use (code model_not_found) and for a disabled one
    (code model_disabled): both are the client's to fix by picking another model.
    `loaded`: the pool row if the caller already has it (a chat's own pool)."""
    if loaded is not None and loaded.name == name:
        pool = loaded
    else:
        row = fetch_one(_POOL_BY_NAME, [name]) if plausible_pool_name(name) else None
        pool = _POOL.build(row) if row is not None else None
    return pool_checked(tenant, name, pool)


def pool_checked(tenant, name, pool: ModelPool | None) -> ModelPool:
    """`pool` (the row named `name`, None when there is none) if the tenant may use it now;
    else pool_for_tenant's InvalidInput."""
    if pool is not None:
        allowed_ids = allowed_pool_ids(tenant)
        allowed = not allowed_ids or pool.pk in allowed_ids
    else:
        allowed = False
    if not allowed:
        shown = repr(name if not isinstance(name, str) or len(name) <= 60 else name[:60] + "...")
        raise InvalidInput(f"unknown model {shown}; GET /api/models/ lists the models you can use",
                           field="model", code="model_not_found")
    if not pool.enabled:
        raise InvalidInput(f"the model {name!r} is disabled right now; pick another model from GET /api/models/",
                           field="model", code="model_disabled")
    return pool
