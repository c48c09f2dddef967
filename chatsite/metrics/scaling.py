"""Live signals for a pool's scale recommendation, from Postgres and heartbeats."""
from datetime import timedelta

from django.utils import timezone

from chatsite.pools.autoscale import Policy, Signals, recommend
from chatsite.pools.health import live_workers, pool_workers
from chatsite.pools.models import ModelPool
from chatsite.runs.models import GenerationRun

WINDOW = timedelta(minutes=5)


def pool_signals(pool: ModelPool, workers: dict | None = None) -> Signals:
    now = timezone.now()
    beats = [b for b in pool_workers(pool.name, workers).values() if b.get("ready") == "1"]
    runs = GenerationRun.objects.filter(pool=pool)
    recent = runs.filter(finished_at__gte=now - WINDOW)
    ttfts = sorted(recent.exclude(ttft_ms=None).values_list("ttft_ms", flat=True))
    p95 = ttfts[min(len(ttfts) - 1, int(0.95 * len(ttfts)))] if ttfts else None
    done = recent.count()
    seconds = WINDOW.total_seconds()
    return Signals(
        replicas=len(beats),
        queued=runs.filter(status=GenerationRun.Status.QUEUED).count(),
        kv_usage=sum(float(b.get("kv_cache_usage", 0)) for b in beats) / len(beats) if beats else 0.0,
        ttft_p95_ms=p95,
        arrival_rate=runs.filter(queued_at__gte=now - WINDOW).count() / seconds,
        service_rate=(done / seconds / len(beats)) if beats and done else None,
    )


def pool_recommend(pool: ModelPool, workers: dict | None = None) -> tuple[int, str, Signals]:
    signals = pool_signals(pool, workers)
    policy = Policy(pool.ttft_slo_ms, pool.min_replicas, pool.max_replicas, pool.replica_warmup_seconds)
    replicas, reason = recommend(signals, policy)
    return replicas, reason, signals


def pools_record_recommendations() -> dict[str, int]:
    """Compute and store each enabled pool's recommendation (the beat task calls this)."""
    workers = live_workers()
    out = {}
    for pool in ModelPool.objects.filter(enabled=True):
        replicas, reason, _ = pool_recommend(pool, workers)
        ModelPool.objects.filter(pk=pool.pk).update(recommended_replicas=replicas, recommendation_reason=reason[:300])
        out[pool.name] = replicas
    return out
