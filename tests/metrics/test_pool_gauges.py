"""/metrics gives each pool's fleet, queue age, settings and no-worker refusals, for the alert rules."""
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from chatsite.runs.models import GenerationRun
from chatsite.runs.admission import run_submit
from tests.api.helpers import key_client
from tests.factories import ChatFactory, PoolFactory, queueing_pool
from tests.heartbeat import beat

pytestmark = pytest.mark.django_db


def value(text: str, name: str, pool: str) -> float:
    match = re.search(rf'^{name}\{{pool="{pool}"\}} (\S+)$', text, re.M)
    assert match, f"{name} for {pool} not in /metrics"
    return float(match.group(1))


def test_pool_gauges_count_workers_age_the_queue_and_carry_the_settings(tenant, user, api_key):
    pool = queueing_pool("mg-pool", ttft_slo_ms=1500, max_queue_wait_seconds=45, min_replicas=2, max_replicas=6)
    beat("mg-1@host", "mg-pool")
    beat("mg-2@host", "mg-pool", ready=False)
    beat("mg-3@host", "mg-pool", draining=True)
    beat("mg-4@host", "mg-pool", age=30)  # gone
    run = run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=pool), content="hi")
    GenerationRun.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(seconds=90))
    no_worker = ChatFactory(tenant=tenant, owner=user, pool=PoolFactory(name="mg-empty"))
    resp = key_client(api_key).post(f"/api/chats/{no_worker.pk}/messages/", {"content": "hi"},
                                    content_type="application/json")
    assert resp.status_code == 503
    text = Client().get("/metrics").content.decode()
    assert (value(text, "chatsite_pool_live_workers", "mg-pool"), value(text, "chatsite_pool_ready_workers", "mg-pool"),
            value(text, "chatsite_pool_draining_workers", "mg-pool")) == (2, 1, 1)
    assert 89 <= value(text, "chatsite_queue_oldest_seconds", "mg-pool") < 150
    assert value(text, "chatsite_queue_oldest_seconds", "mg-empty") == 0
    assert value(text, "chatsite_pool_live_workers", "mg-empty") == 0
    assert value(text, "chatsite_unavailable_total", "mg-empty") >= 1
    settings = {name: value(text, f"chatsite_pool_{name}", "mg-pool") for name in
                ("ttft_slo_seconds", "max_queue_wait_seconds", "min_replicas", "max_replicas", "queue_when_cold")}
    assert settings == {"ttft_slo_seconds": 1.5, "max_queue_wait_seconds": 45, "min_replicas": 2, "max_replicas": 6,
                        "queue_when_cold": 1}
