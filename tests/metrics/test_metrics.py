"""/metrics shows queue depth, runs, latency histograms, worker figures and refusals."""
import re

import httpx
import pytest

from chatsite.quotas.models import TenantQuota
from chatsite.redis_client import get_redis
from chatsite.runs import queues
from chatsite.tenancy.services import api_key_create
from tests.factories import ChatFactory, TenantFactory, UserFactory, queueing_pool
from tests.runs.helpers import post_message, wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)


def metric(text: str, name: str, **labels) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    match = re.search(rf"^{re.escape(name)}\{{{re.escape(want)}\}} (\S+)$", text, re.M)
    assert match, f"{name}{{{want}}} not in /metrics:\n" + "\n".join(line for line in text.splitlines()
                                                                   if line.startswith(name) or "error" in line)
    return float(match.group(1))


def test_metrics_reflect_runs_workers_and_refusals(live_url, fake_workers, chat, tenant, auth):
    before = httpx.get(f"{live_url}/metrics").text
    count_before = metric(before, "chatsite_ttft_seconds_count", pool="flagship")
    run = post_message(live_url, auth, chat.pk, max_tokens=10)
    wait_terminal(run["id"])
    TenantQuota.objects.create(tenant=tenant, token_budget=1)
    assert httpx.post(f"{live_url}/api/chats/{chat.pk}/messages/", headers=auth, json={"content": "hi"}).status_code == 429
    text = httpx.get(f"{live_url}/metrics").text
    assert metric(text, "chatsite_ttft_seconds_count", pool="flagship") == count_before + 1
    assert metric(text, "chatsite_ttft_seconds_bucket", pool="flagship", le="+Inf") >= 1
    assert metric(text, "chatsite_runs", pool="flagship", status="completed") >= 1
    assert metric(text, "chatsite_refusals_total", kind="budget") >= 1
    workers = re.findall(r'^chatsite_worker_ready\{worker="([^"]+)",pool="flagship"\} 1.0$', text, re.M)
    assert workers, "a ready flagship worker reports in /metrics"


def test_queue_depth_counts_the_runs_waiting_in_each_tier(live_url, tenant, user, auth):
    pool = queueing_pool("qd-pool")  # no worker serves it: what is admitted stays queued
    try:
        for tier, n in (("interactive", 2), ("batch", 1)):
            for _ in range(n):
                chat = ChatFactory(tenant=tenant, owner=user, pool=pool)
                resp = httpx.post(f"{live_url}/api/chats/{chat.pk}/messages/", headers=auth,
                                  json={"content": "wait", "tier": tier})
                assert resp.status_code == 202, resp.text
        text = httpx.get(f"{live_url}/metrics").text
        assert metric(text, "chatsite_queue_depth", pool="qd-pool", tier="interactive") == 2
        assert metric(text, "chatsite_queue_depth", pool="qd-pool", tier="batch") == 1
        assert metric(text, "chatsite_fair_queue_tenants", pool="qd-pool", tier="interactive") == 1
        other = TenantFactory()
        other_user = UserFactory(tenant=other)
        _, secret = api_key_create(user=other_user, tenant=other, name="other")
        chat = ChatFactory(tenant=other, owner=other_user, pool=pool)
        resp = httpx.post(f"{live_url}/api/chats/{chat.pk}/messages/", headers={"Authorization": f"Bearer {secret}"},
                          json={"content": "wait"})
        assert resp.status_code == 202, resp.text
        text = httpx.get(f"{live_url}/metrics").text
        assert metric(text, "chatsite_fair_queue_tenants", pool="qd-pool", tier="interactive") == 2
        assert metric(text, "chatsite_fair_queue_tenants", pool="qd-pool", tier="batch") == 1
    finally:
        r = get_redis()
        r.delete(*(queues.pool_queue("qd-pool", tier) for tier in queues.TIERS), *(r.keys("fair:qd-pool:*") or ["-"]))
