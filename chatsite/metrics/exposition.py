"""The /metrics page in Prometheus text format: what an autoscaler and an operator need."""
from collections.abc import Iterator

import redis
from django.conf import settings
from django.db.models import Count

from chatsite.metrics.counters import LATENCY_BUCKETS_MS, read_counter, read_histogram
from chatsite.metrics.persistence import persistence_lines
from chatsite.pools.health import live_workers
from chatsite.pools.models import ModelPool
from chatsite.runs import queues
from chatsite.runs.models import GenerationRun

WORKER_GAUGES = {
    "kv_cache_usage": "KV-cache use of the worker's engine, 0..1",
    "running": "requests running in the engine",
    "waiting": "requests waiting in the engine",
    "tokens_per_second": "tokens generated per second",
    "prefix_cache_hit_rate": "prefix-cache hit rate since start",
    "draining": "1 while the worker drains",
    "ready": "1 once the engine is loaded",
}


def _labels(**kv) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in kv.items()) + "}"


def _meta(name: str, kind: str, help_text: str) -> Iterator[str]:
    yield f"# HELP {name} {help_text}"
    yield f"# TYPE {name} {kind}"


def _queue_depths(pools) -> Iterator[str]:
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    yield from _meta("chatsite_queue_depth", "gauge", "runs waiting in a pool's Celery queue")
    pipe = broker.pipeline(transaction=False)
    names = [(p.name, tier) for p in pools for tier in queues.TIERS]
    for pool, tier in names:
        pipe.llen(queues.pool_queue(pool, tier))
    for (pool, tier), depth in zip(names, pipe.execute()):
        yield f"chatsite_queue_depth{_labels(pool=pool, tier=tier)} {depth}"


def _runs(pools) -> Iterator[str]:
    yield from _meta("chatsite_runs", "gauge", "generation runs by pool and status")
    rows = GenerationRun.objects.values("pool__name", "status").annotate(n=Count("id")).order_by()
    for row in rows:
        yield f"chatsite_runs{_labels(pool=row['pool__name'], status=row['status'])} {row['n']}"


def _histograms(pools) -> Iterator[str]:
    for name, help_text in (("ttft", "time from queued to first token"), ("itl", "mean inter-token latency of a run")):
        metric = f"chatsite_{name}_seconds"
        yield from _meta(metric, "histogram", help_text)
        for pool in pools:
            data = read_histogram(name, pool.name)
            running = 0.0
            for bucket in [*map(str, LATENCY_BUCKETS_MS), "+Inf"]:
                running += data.get(bucket, 0.0)
                le = "+Inf" if bucket == "+Inf" else str(int(bucket) / 1000)
                yield f"{metric}_bucket{_labels(pool=pool.name, le=le)} {int(running)}"
            yield f"{metric}_sum{_labels(pool=pool.name)} {data.get('sum', 0.0)}"
            yield f"{metric}_count{_labels(pool=pool.name)} {int(data.get('count', 0))}"


def _workers() -> Iterator[str]:
    workers = live_workers()
    for field, help_text in WORKER_GAUGES.items():
        metric = f"chatsite_worker_{field}"
        yield from _meta(metric, "gauge", help_text)
        for name, beat in sorted(workers.items()):
            yield f"{metric}{_labels(worker=name, pool=beat.get('pool', ''))} {float(beat.get(field, 0))}"


def _counters(pools) -> Iterator[str]:
    yield from _meta("chatsite_refusals_total", "counter", "requests refused for a tenant's own limits")
    for kind, n in sorted(read_counter("refusals").items()):
        yield f"chatsite_refusals_total{_labels(kind=kind)} {int(n)}"
    yield from _meta("chatsite_shed_total", "counter", "requests shed because a pool's queue was too long")
    for pool, n in sorted(read_counter("shed").items()):
        yield f"chatsite_shed_total{_labels(pool=pool)} {int(n)}"
    yield from _meta("chatsite_pool_recommended_replicas", "gauge", "the scale recommendation per pool")
    for pool in pools:
        if pool.recommended_replicas is not None:
            yield f"chatsite_pool_recommended_replicas{_labels(pool=pool.name)} {pool.recommended_replicas}"


def render() -> str:
    pools = list(ModelPool.objects.filter(enabled=True))
    lines = [*_queue_depths(pools), *_runs(pools), *_histograms(pools), *_workers(), *_counters(pools),
             *persistence_lines()]
    return "\n".join(lines) + "\n"
