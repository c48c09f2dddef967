"""OpenAI's x-ratelimit-* headers on /v1/ responses, from the tenant's quota, moving
as the tenant spends it (live stack, fake engine)."""
import re
import time

import httpx
import pytest

from chatsite.openai_api.ratelimit import duration
from chatsite.quotas.models import TenantQuota, TenantUsage
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "flagship", "messages": [{"role": "user", "content": "What does a for loop do?"}], "max_tokens": 20}
TRIO = ("x-ratelimit-limit-{}", "x-ratelimit-remaining-{}", "x-ratelimit-reset-{}")


def _post(live_url, api_key, **extra):
    return httpx.post(f"{live_url}/v1/chat/completions", json={**BODY, **extra}, timeout=60,
                      headers={"Authorization": f"Bearer {api_key}"})


def _seconds(reset: str) -> int:
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(\d+)s", reset)
    assert match, reset
    hours, minutes, secs = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + secs


def _away_from_the_minute_boundary():
    if 60 - time.time() % 60 < 8:  # the per-minute counter would renew between two requests
        time.sleep(60 - time.time() % 60 + 0.5)


def test_headers_count_requests_and_tokens(live_url, fake_workers, pool, api_key, tenant):
    TenantQuota.objects.create(tenant=tenant, requests_per_minute=50, token_budget=100_000, period="day")
    _away_from_the_minute_boundary()
    first = _post(live_url, api_key)
    assert first.status_code == 200, first.text
    h = first.headers
    assert (h["x-ratelimit-limit-requests"], h["x-ratelimit-remaining-requests"]) == ("50", "49")
    assert 0 < _seconds(h["x-ratelimit-reset-requests"]) <= 60
    # The tokens header is read in the call's admission: it counts what the run reserved
    # (its prompt estimate and max_tokens), as OpenAI's counts max_tokens, not what it spent.
    run = wait_terminal(int(h["x-run-id"]))
    assert run.reserved_tokens >= BODY["max_tokens"]
    assert h["x-ratelimit-limit-tokens"] == "100000"
    assert int(h["x-ratelimit-remaining-tokens"]) == 100_000 - run.reserved_tokens
    assert 0 < _seconds(h["x-ratelimit-reset-tokens"]) <= 86_400  # the day's budget renews at midnight UTC
    spent = run.prompt_tokens + run.completion_tokens  # settled: the first run's reservation became this
    second = _post(live_url, api_key, stream=True)
    assert second.headers["x-ratelimit-remaining-requests"] == "48"
    then = wait_terminal(int(second.headers["x-run-id"]))
    assert int(second.headers["x-ratelimit-remaining-tokens"]) == 100_000 - spent - then.reserved_tokens
    listed = httpx.get(f"{live_url}/v1/models", headers={"Authorization": f"Bearer {api_key}"})
    assert listed.headers["x-ratelimit-remaining-requests"] == "48"  # reading the list is not a request to a model


def test_only_the_limits_the_tenant_has(live_url, fake_workers, pool, api_key, tenant):
    client = v1_client(live_url, api_key)
    raw = client.chat.completions.with_raw_response.create(**BODY)
    assert not [name for name in raw.headers if name.startswith("x-ratelimit")]
    TenantQuota.objects.create(tenant=tenant, token_budget=5000)
    raw = client.chat.completions.with_raw_response.create(**BODY)
    assert raw.parse().choices[0].message.content
    assert sorted(name for name in raw.headers if name.startswith("x-ratelimit")) == sorted(
        t.format("tokens") for t in TRIO)


def test_a_429_carries_the_headers_too(live_url, fake_workers, pool, api_key, tenant):
    TenantQuota.objects.create(tenant=tenant, requests_per_minute=1)
    _away_from_the_minute_boundary()
    assert _post(live_url, api_key).headers["x-ratelimit-remaining-requests"] == "0"
    refused = _post(live_url, api_key)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
    assert TenantUsage.objects.get(tenant=tenant).refused_requests == 1
    assert refused.headers["x-ratelimit-limit-requests"] == "1"
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert int(refused.headers["retry-after"]) >= _seconds(refused.headers["x-ratelimit-reset-requests"]) - 1


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (0.2, "1s"), (59, "59s"), (60, "1m0s"), (361, "6m1s"),
                                           (3600, "1h0m0s"), (86_399.5, "24h0m0s")])
def test_durations_read_as_openais(seconds, text):
    assert duration(seconds) == text
