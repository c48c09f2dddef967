"""The /metrics page in Prometheus text format: what an autoscaler and an operator need."""
from collections.abc import Iterator

import redis
from django.conf import settings
from django.db.models import Count, Min
from django.utils import timezone

from chatsite.counters import LATENCY_BUCKETS_MS, read_counter, read_histogram
from chatsite.metrics.persistence import persistence_lines
from chatsite.pools.health import live_workers
from chatsite.pools.models import ModelPool
from chatsite.runs import fair_queue, queues
from chatsite.runs.models import GenerationRun

WORKER_GAUGES = {
    "kv_cache_usage": "KV-cache use of the worker's engine, 0..1",
    "running": "requests running in the engine",
    "waiting": "requests waiting in the engine",
    "tokens_per_second": "tokens generated per second",
    "prefix_cache_hit_rate": "prefix-cache hit rate since start",
    "draining": "1 while the worker drains",
    "ready": "1 once the engine is loaded",
    "disabled": "1 while the worker waits, with no engine loaded, for its disabled pool to be enabled",
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


def _fair_tenants(pools) -> Iterator[str]:
    yield from _meta("chatsite_fair_queue_tenants", "gauge",
                     "tenants with runs waiting in a pool's tier (served round robin: chatsite/runs/fair_queue.py)")
    names = [(p.name, tier) for p in pools for tier in queues.TIERS]
    for (pool, tier), tenants in zip(names, fair_queue.tenants_waiting(names)):
        yield f"chatsite_fair_queue_tenants{_labels(pool=pool, tier=tier)} {tenants}"


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


def _queue_age(pools) -> Iterator[str]:
    yield from _meta("chatsite_queue_oldest_seconds", "gauge",
                     "seconds the oldest queued run of a pool has waited (0: none waits)")
    rows = (GenerationRun.objects.filter(status=GenerationRun.Status.QUEUED, pool__in=pools)
            .values("pool__name").annotate(oldest=Min("queued_at")).order_by())
    oldest = {row["pool__name"]: row["oldest"] for row in rows}
    now = timezone.now()
    for pool in pools:
        age = (now - oldest[pool.name]).total_seconds() if pool.name in oldest else 0.0
        yield f"chatsite_queue_oldest_seconds{_labels(pool=pool.name)} {max(age, 0.0):.3f}"


POOL_SETTINGS = {  # gauge -> (help, the pool's value); alert rules compare live figures with these
    "ttft_slo_seconds": ("the pool's time-to-first-token p95 objective", lambda p: p.ttft_slo_ms / 1000),
    "max_queue_wait_seconds": ("the longest expected queue wait the pool admits", lambda p: p.max_queue_wait_seconds),
    "min_replicas": ("the fewest workers the pool should run", lambda p: p.min_replicas),
    "max_replicas": ("the most workers the pool may run", lambda p: p.max_replicas),
    "queue_when_cold": ("1 when the pool queues runs while it has no live worker", lambda p: int(p.queue_when_cold)),
}


def _pools(pools, workers: dict) -> Iterator[str]:
    for name, (help_text, value) in POOL_SETTINGS.items():
        yield from _meta(f"chatsite_pool_{name}", "gauge", help_text)
        for pool in pools:
            yield f"chatsite_pool_{name}{_labels(pool=pool.name)} {value(pool)}"
    counts = {"live_workers": ("workers heard from in the last few seconds that take work (not draining)",
                               lambda b: b.get("draining") != "1"),
              "ready_workers": ("workers whose engine is ready and that are not draining",
                                lambda b: b.get("ready") == "1" and b.get("draining") != "1"),
              "draining_workers": ("workers draining (finishing their runs, taking none)",
                                   lambda b: b.get("draining") == "1")}
    for name, (help_text, counted) in counts.items():
        yield from _meta(f"chatsite_pool_{name}", "gauge", help_text)
        for pool in pools:
            n = sum(1 for b in workers.values() if b.get("pool") == pool.name and counted(b))
            yield f"chatsite_pool_{name}{_labels(pool=pool.name)} {n}"


def _workers(workers: dict) -> Iterator[str]:
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
    yield from _meta("chatsite_unavailable_total", "counter", "requests refused because no worker of a pool was live")
    for pool, n in sorted(read_counter("unavailable").items()):
        yield f"chatsite_unavailable_total{_labels(pool=pool)} {int(n)}"
    yield from _meta("chatsite_pool_recommended_replicas", "gauge", "the scale recommendation per pool")
    for pool in pools:
        if pool.recommended_replicas is not None:
            yield f"chatsite_pool_recommended_replicas{_labels(pool=pool.name)} {pool.recommended_replicas}"


def render() -> str:
    pools = list(ModelPool.objects.filter(enabled=True))
    workers = live_workers()
    lines = [*_queue_depths(pools), *_fair_tenants(pools), *_queue_age(pools), *_runs(pools), *_histograms(pools), *_pools(pools, workers),
             *_workers(workers), *_counters(pools), *persistence_lines()]
    return "\n".join(lines) + "\n"
