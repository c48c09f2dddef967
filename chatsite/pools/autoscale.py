"""Scale recommendations per pool, from the signals that track saturation.

Queue depth, KV-cache use and TTFT p95 against the pool's SLO, never CPU or GPU
utilization. Replicas take minutes to warm, so the recommendation looks ahead
by the warm-up time and keeps a warm buffer; it scales down one replica at a
time, and only when every signal is low.
"""
import math
from dataclasses import dataclass

KV_TARGET = 0.75  # keep average KV use below this; above it the batch cannot grow
BUFFER_REPLICAS = 1


@dataclass(frozen=True)
class Signals:
    replicas: int  # ready replicas now
    queued: int  # runs waiting in the pool's queues
    kv_usage: float  # mean KV-cache use across ready replicas, 0..1
    ttft_p95_ms: float | None  # over the last few minutes
    arrival_rate: float  # runs per second arriving
    service_rate: float | None  # runs per second one replica completes (None: unknown yet)


@dataclass(frozen=True)
class Policy:
    ttft_slo_ms: float
    min_replicas: int
    max_replicas: int
    warmup_seconds: float


def recommend(s: Signals, p: Policy) -> tuple[int, str]:
    """(replicas to run, the reason in words)."""
    reasons, want = [], s.replicas
    if s.service_rate:
        # capacity for the arrival rate, plus clearing the queue within the warm-up time
        need = (s.arrival_rate + s.queued / max(p.warmup_seconds, 1)) / s.service_rate
        want = max(want if need > s.replicas else 0, math.ceil(need))
        reasons.append(f"demand {need:.2f} replicas")
    if s.replicas and s.kv_usage > KV_TARGET:
        want = max(want, math.ceil(s.replicas * s.kv_usage / KV_TARGET))
        reasons.append(f"KV use {s.kv_usage:.0%} > {KV_TARGET:.0%}")
    if s.ttft_p95_ms is not None and s.ttft_p95_ms > p.ttft_slo_ms:
        want = max(want, s.replicas + 1)
        reasons.append(f"TTFT p95 {s.ttft_p95_ms:.0f} ms > SLO {p.ttft_slo_ms:.0f} ms")
    if s.queued and not s.service_rate and s.replicas == 0:
        want = max(want, 1)
        reasons.append("work is waiting and no replica is up")
    want += BUFFER_REPLICAS  # a warm spare: a new replica takes minutes
    calm = (s.queued == 0 and s.kv_usage < KV_TARGET / 2
            and (s.ttft_p95_ms is None or s.ttft_p95_ms < p.ttft_slo_ms / 2))
    if want < s.replicas:
        want = s.replicas - 1 if calm else s.replicas  # shrink slowly, only when everything is calm
        reasons.append("calm: one replica fewer" if calm else "holding: not calm enough to shrink")
    want = min(max(want, p.min_replicas), p.max_replicas)
    return want, "; ".join(reasons) or "steady"
