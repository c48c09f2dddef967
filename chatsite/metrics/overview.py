"""The figures an operator checks first, on one page (chatsite/web/operations.py): the last
hour's runs per pool and status, what waits now, time to first token, decode speed and the
workers alive. From what /metrics reads too: the runs table and the workers' heartbeats."""
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Aggregate, Count, F, FloatField, Min, Q, Sum
from django.utils import timezone

from chatsite.pools.health import live_workers
from chatsite.pools.models import ModelPool
from chatsite.runs.models import GenerationRun

WINDOW = timedelta(hours=1)
STATUSES = [s.value for s in GenerationRun.Status]


class Percentile(Aggregate):
    """Postgres's continuous percentile of an expression: Percentile("ttft_ms", 0.95)."""

    function = "PERCENTILE_CONT"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression, fraction: float, **extra):
        super().__init__(expression, fraction=float(fraction), **extra)


@dataclass
class PoolFigures:
    pk: int
    name: str
    display_name: str
    runs: dict[str, int] = field(default_factory=dict)  # status -> runs queued in the window
    queued_now: int = 0
    oldest_wait_seconds: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p95_ms: float | None = None
    ttft_slo_ms: int = 0
    decode_tokens_per_second: float | None = None  # a run's, median over the window
    tokens_per_second_now: float = 0.0  # the pool's workers' engines, as they last beat
    tokens_last_hour: int = 0
    workers: list[dict] = field(default_factory=list)


@dataclass
class Overview:
    at: datetime
    since: datetime
    pools: list[PoolFigures]
    workers_alive: int


def _worker(name: str, beat: dict) -> dict:
    num = lambda key: float(beat.get(key) or 0)  # noqa: E731
    state = "draining" if beat.get("draining") == "1" else "ready" if beat.get("ready") == "1" else "starting"
    return {"name": name, "state": state, "running": int(num("running")), "waiting": int(num("waiting")),
            "kv_cache_usage": num("kv_cache_usage"), "tokens_per_second": num("tokens_per_second")}


def operations_overview(*, now: datetime | None = None) -> Overview:
    """The enabled pools' figures over the last hour (WINDOW) and now."""
    now = now or timezone.now()
    since = now - WINDOW
    pools = {p.name: PoolFigures(p.pk, p.name, p.display_name, runs=dict.fromkeys(STATUSES, 0), ttft_slo_ms=p.ttft_slo_ms)
             for p in ModelPool.objects.filter(enabled=True)}
    recent = GenerationRun.objects.filter(pool__name__in=pools, queued_at__gte=since)
    for row in recent.values("pool__name", "status").annotate(n=Count("id")).order_by():
        pools[row["pool__name"]].runs[row["status"]] = row["n"]
    timed = (GenerationRun.objects.filter(pool__name__in=pools, finished_at__gte=since)
             .values("pool__name").order_by()
             .annotate(p50=Percentile("ttft_ms", 0.5), p95=Percentile("ttft_ms", 0.95),
                       itl=Percentile("itl_ms", 0.5, filter=Q(itl_ms__gt=0)), tokens=Sum("completion_tokens")))
    for row in timed:
        figures = pools[row["pool__name"]]
        figures.ttft_p50_ms, figures.ttft_p95_ms = row["p50"], row["p95"]
        figures.decode_tokens_per_second = 1000 / row["itl"] if row["itl"] else None
        figures.tokens_last_hour = row["tokens"] or 0
    waiting = (GenerationRun.objects.filter(pool__name__in=pools, status=GenerationRun.Status.QUEUED)
               .values("pool__name").order_by().annotate(n=Count("id"), oldest=Min(F("queued_at"))))
    for row in waiting:
        pools[row["pool__name"]].queued_now = row["n"]
        pools[row["pool__name"]].oldest_wait_seconds = max(0.0, (now - row["oldest"]).total_seconds())
    workers = live_workers()
    for name, beat in sorted(workers.items()):
        if beat.get("pool") in pools:
            figures = pools[beat["pool"]]
            figures.workers.append(_worker(name, beat))
            figures.tokens_per_second_now += float(beat.get("tokens_per_second") or 0)
    return Overview(at=now, since=since, pools=list(pools.values()), workers_alive=len(workers))
