"""OpenAI's rate-limit headers on /v1/ responses, from the tenant's quota: a trio per
limit the tenant has (requests per minute; its token budget), none for one it has not."""
import math

from asgiref.sync import sync_to_async

from chatsite.quotas.selectors import Allowance, quota_allowances


def duration(seconds: float) -> str:
    """Seconds as OpenAI writes a reset: 59s, 6m0s, 3h12m5s (rounded up to the second)."""
    total = max(0, math.ceil(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def headers(allowances) -> dict[str, str]:
    out = {}
    for name, allowance in (("requests", allowances.requests), ("tokens", allowances.tokens)):
        if allowance is not None:
            out.update(_trio(name, allowance))
    return out


def _trio(name: str, allowance: Allowance) -> dict[str, str]:
    return {f"x-ratelimit-limit-{name}": str(allowance.limit),
            f"x-ratelimit-remaining-{name}": str(allowance.remaining),
            f"x-ratelimit-reset-{name}": duration(allowance.reset_seconds)}


async def add_headers(response, key):
    """`response` with the rate-limit headers of the key's tenant (read after the request's
    own admission, so they count it). `key`: the request's KeyRead."""
    for name, value in headers(await sync_to_async(quota_allowances)(key.tenant, key.limits.quota)).items():
        response[name] = value
    return response
