"""Admission against a tenant's limits, and settling the token ledger.

A run reserves prompt + completion cap at admission (a completion's n choices: the
prompt once, and a cap for each), under a row lock on the tenant's usage row, so a
burst of parallel requests cannot overspend; finalize settles what the run used and
releases the rest."""
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import connection
from django.db.models import F
from django.utils import timezone

from chatsite import redis_keys
from chatsite.errors import RateLimited
from chatsite.counters import count_refusal
from chatsite.quotas.models import TenantQuota, TenantUsage
from chatsite.quotas.periods import period_end, period_start
from chatsite.redis_client import get_redis


@dataclass(frozen=True)
class Reservation:
    reserved_tokens: int
    budget_cap: int | None  # total tokens the run may use, when the tenant has a budget


def quota_for(tenant) -> TenantQuota | None:
    """The tenant's quota (None: no limits)."""
    return TenantQuota.objects.filter(tenant=tenant).first()


def quota_check_rate(*, tenant, quota: TenantQuota | None) -> None:
    """Requests per minute (a Redis counter per minute), against the tenant's quota
    (`quota_for`, read once by the caller). Raises RateLimited."""
    if quota is None or quota.requests_per_minute is None:
        return
    minute = int(time.time() // 60)
    key = redis_keys.tenant_rate(tenant.pk, minute)
    pipe = get_redis().pipeline()
    pipe.incr(key)
    pipe.expire(key, 120)
    count, _ = pipe.execute()
    if count > quota.requests_per_minute:
        count_refusal("rate")
        raise RateLimited(f"your team's limit of {quota.requests_per_minute} requests per minute is reached",
                          code="rate_limited", retry_after=max(1, 60 - int(time.time() % 60)))


def _usage_row(tenant, period: str) -> TenantUsage:
    """This period's usage row, locked (created the first time: one statement otherwise)."""
    start = period_start(timezone.now(), period)
    usage = TenantUsage.objects.select_for_update().filter(tenant=tenant, period_start=start).first()
    if usage is None:
        TenantUsage.objects.get_or_create(tenant=tenant, period_start=start)
        usage = TenantUsage.objects.select_for_update().get(tenant=tenant, period_start=start)
    return usage


def quota_reserve_choices(*, tenant, quota: TenantQuota | None, prompt_tokens: int, max_tokens: int,
                          active_runs, choices: int) -> list[Reservation]:
    """Reserve tokens for `choices` runs answering one prompt (a /v1 call's n), one
    Reservation each: the prompt counted once (in the first), and up to `max_tokens`
    for every choice. One choice that does not fit the budget left is capped (it ends
    with finish_reason "budget"); several are refused unless all of them fit whole, so
    no choice is cut short where the others are not. Each run counts against the
    tenant's runs at once (`active_runs`, a callable counting the tenant's queued and
    running runs, is called only when the tenant has that limit). Call inside the
    admission transaction: the usage row's lock is held until commit.

    Raises RateLimited for too many runs at once or a budget that cannot hold them."""
    if quota is None or (quota.token_budget is None and quota.max_concurrent_runs is None):
        # Nothing to enforce: no reservation, and no lock that would serialize this
        # tenant's admissions (and its runs' finalizes) on one row. Usage is still
        # counted when each run is settled.
        return [Reservation(0, None)] * choices
    period = quota.period
    usage = _usage_row(tenant, period)  # the row lock serializes this tenant's admissions
    if quota.max_concurrent_runs is not None and (active := active_runs()) + choices > quota.max_concurrent_runs:
        count_refusal("concurrency")
        more = f"; {choices} choices are {choices} more" if choices > 1 else ""
        raise RateLimited(f"your team already has {active} replies in progress, the most it may run at once is "
                          f"{quota.max_concurrent_runs}{more}", code="concurrency_limit", retry_after=5)
    cap, limited = max_tokens, False
    if quota.token_budget is not None:
        limited = True
        left = quota.token_budget - usage.used_tokens - usage.reserved_tokens
        need = prompt_tokens + (1 if choices == 1 else choices * max_tokens)
        if left < need:
            count_refusal("budget")
            raise _budget_refusal(quota, usage, left=left, need=need, choices=choices, max_tokens=max_tokens)
        cap = min(max_tokens, left - prompt_tokens)
    reservations = [Reservation(prompt_tokens + cap if i == 0 else cap, prompt_tokens + cap if limited else None)
                    for i in range(choices)]
    TenantUsage.objects.filter(pk=usage.pk).update(
        reserved_tokens=F("reserved_tokens") + sum(r.reserved_tokens for r in reservations))
    return reservations


def _budget_refusal(quota: TenantQuota, usage: TenantUsage, *, left: int, need: int, choices: int,
                    max_tokens: int) -> RateLimited:
    seconds = (period_end(usage.period_start, quota.period) - timezone.now()).total_seconds()
    renews = f"it renews in {math.ceil(seconds / 3600)} h"
    if choices == 1 or left <= 0:
        message = (f"your team's token budget for this {quota.period} is used up ({quota.token_budget} tokens); "
                   f"{renews}")
    else:
        message = (f"n={choices} choices of up to {max_tokens} tokens each, with the prompt, need {need} tokens, "
                   f"but your team's token budget for this {quota.period} has {left} left; ask for fewer choices "
                   f"or fewer max_tokens ({renews})")
    return RateLimited(message, code="budget_exhausted", retry_after=math.ceil(seconds))


@contextmanager
def refusals_counted(tenant):
    """Count a RateLimited raised inside on the tenant's usage row, once, and only where
    no transaction is open around it: a count written inside the transaction that the
    refusal rolls back (a /v1 call's, which also creates the chat) would vanish with it.
    Wrap the admission, and every caller that runs it inside a transaction of its own."""
    try:
        yield
    except RateLimited as refused:
        if not refused.counted and not connection.in_atomic_block:
            quota_record_refusal(tenant=tenant)
            refused.counted = True
        raise


def quota_record_refusal(*, tenant) -> None:
    """Count a refused request on the tenant's usage row (after the admission rolled back)."""
    quota = quota_for(tenant)
    start = period_start(timezone.now(), quota.period if quota else TenantQuota.Period.MONTH)
    usage, _ = TenantUsage.objects.get_or_create(tenant=tenant, period_start=start)
    TenantUsage.objects.filter(pk=usage.pk).update(refused_requests=F("refused_requests") + 1)
