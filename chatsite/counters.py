"""Platform counters and latency histograms, kept in Redis so every process adds to one set."""
import logging

from chatsite import redis_keys
from chatsite.redis_client import get_redis

log = logging.getLogger(__name__)

LATENCY_BUCKETS_MS = (25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


def _incr(name: str, label: str, by: float = 1) -> None:
    try:
        get_redis().hincrbyfloat(redis_keys.metric_counter(name), label, by)
    except Exception:  # metrics never fail a request
        log.warning("could not count %s/%s", name, label)


def count_refusal(kind: str) -> None:
    """A request refused for a tenant's own limits (budget, rate, concurrency)."""
    _incr("refusals", kind)


def count_shed(pool: str) -> None:
    """A request shed because the pool's queue is too long."""
    _incr("shed", pool)


def count_unavailable(pool: str) -> None:
    """A request refused because no worker of the pool is live (503 model_unavailable)."""
    _incr("unavailable", pool)


def observe_latency(name: str, pool: str, value_ms: float) -> None:
    """Add one observation to a pool's histogram (buckets are not cumulative here)."""
    observe_latencies(pool, {name: value_ms})


def observe_latencies(pool: str, values_ms: dict[str, float | None]) -> None:
    """Add one observation to each named histogram of the pool (None: nothing to add),
    in one round trip (a finished run has its TTFT and its inter-token latency)."""
    values = {name: v for name, v in values_ms.items() if v is not None}
    if not values:
        return
    try:
        pipe = get_redis().pipeline(transaction=False)
        for name, value_ms in values.items():
            bucket = next((str(b) for b in LATENCY_BUCKETS_MS if value_ms <= b), "+Inf")
            key = redis_keys.metric_histogram(name, pool)
            pipe.hincrby(key, bucket, 1)
            pipe.hincrbyfloat(key, "sum", value_ms / 1000.0)
            pipe.hincrby(key, "count", 1)
        pipe.execute()
    except Exception:
        log.warning("could not observe %s for %s", ", ".join(values), pool)


def read_counter(name: str) -> dict[str, float]:
    return {k: float(v) for k, v in get_redis().hgetall(redis_keys.metric_counter(name)).items()}


def read_histogram(name: str, pool: str) -> dict[str, float]:
    return {k: float(v) for k, v in get_redis().hgetall(redis_keys.metric_histogram(name, pool)).items()}
