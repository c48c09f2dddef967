from django.core.management.base import BaseCommand

from chatsite.pools.health import live_workers
from chatsite.pools.models import ModelPool
from chatsite.metrics.scaling import pool_recommend


class Command(BaseCommand):
    help = "Print (and record) each pool's recommended replica count and the signals behind it."

    def handle(self, *args, **opts):
        workers = live_workers()
        for pool in ModelPool.objects.filter(enabled=True):
            replicas, reason, s = pool_recommend(pool, workers)
            ModelPool.objects.filter(pk=pool.pk).update(recommended_replicas=replicas,
                                                        recommendation_reason=reason[:300])
            p95 = f"{s.ttft_p95_ms:.0f} ms" if s.ttft_p95_ms is not None else "n/a"
            self.stdout.write(f"{pool.name}: {s.replicas} ready -> recommend {replicas} ({reason}); "
                              f"queued {s.queued}, KV {s.kv_usage:.0%}, TTFT p95 {p95}, "
                              f"arrivals {s.arrival_rate * 60:.1f}/min")
