"""Reads of a tenant's limits and how much of each is left (the rate-limit headers)."""
import time
from dataclasses import dataclass

from django.utils import timezone

from chatsite import redis_keys
from chatsite.quotas.models import TenantUsage
from chatsite.quotas.periods import period_end, period_start
from chatsite.quotas.services import quota_for
from chatsite.redis_client import get_redis


@dataclass(frozen=True)
class Allowance:
    """One limit: its size, what is left of it now, and the seconds until it renews."""

    limit: int
    remaining: int
    reset_seconds: float


@dataclass(frozen=True)
class Allowances:
    requests: Allowance | None  # requests per minute; None: the tenant has no such limit
    tokens: Allowance | None  # the token budget of the period; None: unlimited


_UNREAD = object()


def quota_allowances(tenant, quota=_UNREAD) -> Allowances:
    """What the tenant has left of its requests per minute (counted at admission, as
    quota_check_rate counts them) and of its token budget (settled and reserved
    tokens both count against it, as quota_reserve_choices counts them). Reads only.
    `quota`: the tenant's TenantQuota (or None), when the caller has it already."""
    if quota is _UNREAD:
        quota = quota_for(tenant)
    if quota is None:
        return Allowances(None, None)
    requests = tokens = None
    if quota.requests_per_minute is not None:
        now = time.time()
        count = int(get_redis().get(redis_keys.tenant_rate(tenant.pk, int(now // 60))) or 0)
        requests = Allowance(quota.requests_per_minute, max(0, quota.requests_per_minute - count), 60 - now % 60)
    if quota.token_budget is not None:
        now = timezone.now()
        start = period_start(now, quota.period)
        usage = TenantUsage.objects.filter(tenant=tenant, period_start=start).values_list(
            "used_tokens", "reserved_tokens").first() or (0, 0)
        tokens = Allowance(quota.token_budget, max(0, quota.token_budget - sum(usage)),
                           (period_end(start, quota.period) - now).total_seconds())
    return Allowances(requests, tokens)
