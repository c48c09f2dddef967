"""/metrics as rendered by the platform: what the dashboard, the alerts and the autoscalers may use."""
import re

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from chatsite.counters import count_refusal, count_shed, count_unavailable, observe_latency
from tests.factories import ChatFactory
from tests.heartbeat import beat


@pytest.fixture
def exposed(db, chat) -> dict[str, set[str]]:
    """Sample name -> label names, from /metrics rendered with a worker, a queued run and latencies."""
    from chatsite.runs.admission import run_submit

    beat("obs-1@host", chat.pool.name, kv_cache_usage=0.5, tokens_per_second=12.0)
    beat("obs-2@host", chat.pool.name, draining=True)
    run_submit(chat=ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=chat.pool), content="hi")
    observe_latency("ttft", chat.pool.name, 120)
    observe_latency("itl", chat.pool.name, 15)
    count_unavailable(chat.pool.name)
    count_shed(chat.pool.name)
    count_refusal("budget")
    type(chat.pool).objects.filter(pk=chat.pool.pk).update(recommended_replicas=2)
    text = Client().get("/metrics").content.decode()
    samples: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):  # also proves the text format parses
        for sample in family.samples:
            samples.setdefault(sample.name, set()).update(sample.labels)
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):  # families with no sample yet
        for suffix in (("_bucket", "_sum", "_count") if kind == "histogram" else ("",)):
            samples.setdefault(name + suffix, set())
    return samples
