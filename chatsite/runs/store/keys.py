"""The credential's read: an API key by its prefix, with its user and tenant and what
admitting a run needs of the tenant (its quota, the pools it may use), in one statement:
every API request makes it. For a caller whose credential's read brought no limits (a
browser session's, a queued message's), the tenant's limits alone, in one statement."""
from functools import cache

from django.contrib.auth import get_user_model

from chatsite.quotas.models import TenantQuota
from chatsite.runs.store.engine import Columns, fetch_one, prepared, split
from chatsite.tenancy.credentials import KeyRead, TenantLimits
from chatsite.tenancy.models import ApiKey, Membership, Tenant


def _limits_sql(tenant_id: str) -> tuple[Columns, str]:
    """The quota's columns (alias q, for a LEFT JOIN on its tenant) and the tenant's allowed
    pools as one ARRAY column, for the tenant `tenant_id` (an SQL expression)."""
    quota = Columns(TenantQuota, "q")
    allowed = Tenant.allowed_pools.through._meta.db_table
    return quota, f'{quota.sql}, ARRAY(SELECT a.modelpool_id FROM "{allowed}" a WHERE a.tenant_id = {tenant_id})'


@cache
def _statement():
    key, user, tenant = Columns(ApiKey, "k"), Columns(get_user_model(), "u"), Columns(Tenant, "t")
    quota, limits = _limits_sql("k.tenant_id")
    sql = prepared(
        f'SELECT {key.sql}, {user.sql}, {tenant.sql}, {limits} FROM "{key.table}" k '
        f'JOIN "{user.table}" u ON u.id = k.user_id JOIN "{tenant.table}" t ON t.id = k.tenant_id '
        f'LEFT JOIN "{quota.table}" q ON q.tenant_id = k.tenant_id '
        f'WHERE k.prefix = %s AND k.revoked_at IS NULL AND EXISTS (SELECT 1 FROM "{Membership._meta.db_table}" m '
        f'WHERE m.user_id = k.user_id AND m.tenant_id = k.tenant_id)')
    return sql, (key, user, tenant, quota)


def live_key(*, prefix: str) -> KeyRead | None:
    """The unrevoked key with this prefix whose user is still a member of its tenant
    (removed from it, the keys made while a member stop working too); None otherwise.
    Its secret, and whether user and tenant are active, are the caller's to check."""
    sql, columns = _statement()
    row = fetch_one(sql, [prefix])
    if row is None:
        return None
    key, user, tenant, quota, pool_ids = split(row, *columns)
    key.user, key.tenant = user, tenant
    return KeyRead(key, TenantLimits(quota=quota, allowed_pool_ids=frozenset(pool_ids)))


@cache
def _limits_statement():
    quota, limits = _limits_sql("%(tenant)s")
    sql = prepared(f'SELECT {limits} FROM (SELECT 1) one LEFT JOIN "{quota.table}" q ON q.tenant_id = %(tenant)s')
    return sql, quota


def tenant_limits(*, tenant_id: int) -> TenantLimits:
    """The tenant's quota (None: no limits) and the pools it may use (empty: every enabled one)."""
    sql, quota = _limits_statement()
    read, pool_ids = split(fetch_one(sql, {"tenant": tenant_id}), quota)
    return TenantLimits(quota=read, allowed_pool_ids=frozenset(pool_ids))
