"""The scale recommendation against a simulated day of traffic.

A minute-by-minute queue model: arrivals follow a daily curve with a lunch spike;
each ready replica completes a fixed number of runs per second; a replica asked
for becomes ready only after the warm-up. The recommender must keep TTFT within
the SLO nearly all day while not holding the peak's fleet all night, and must
beat a reactive scaler that only looks at utilization."""
import math

from chatsite.pools.autoscale import Policy, Signals, recommend

SERVICE_RATE = 0.5  # runs/s per replica
WARMUP_MIN = 3
POLICY = Policy(ttft_slo_ms=2000, min_replicas=1, max_replicas=20, warmup_seconds=WARMUP_MIN * 60)
PREFILL_MS = 300  # TTFT floor when nothing waits


def arrivals_per_second(minute: int) -> float:
    hour = minute / 60
    base = 0.3 + 2.7 * max(0.0, math.sin(math.pi * (hour - 7) / 14)) if 7 <= hour <= 21 else 0.3
    spike = 2.5 if 12 * 60 <= minute < 12 * 60 + 20 else 0.0  # a lunch-time burst
    return base + spike


def simulate(decide):
    ready, pending, queue = 1, [], 0.0  # pending: minutes at which asked-for replicas become ready
    violations, replica_minutes, history = 0, 0, []
    for minute in range(24 * 60):
        ready += sum(1 for t in pending if t == minute)
        pending = [t for t in pending if t > minute]
        rate = arrivals_per_second(minute)
        capacity = ready * SERVICE_RATE
        queue = max(0.0, queue + (rate - capacity) * 60)
        wait_ms = queue / capacity * 1000 if capacity else float("inf")
        ttft = PREFILL_MS + wait_ms
        violations += ttft > POLICY.ttft_slo_ms
        utilization = min(1.0, rate / capacity) if capacity else 1.0
        signals = Signals(replicas=ready, queued=int(queue), kv_usage=min(1.0, 0.9 * utilization),
                          ttft_p95_ms=ttft, arrival_rate=rate, service_rate=SERVICE_RATE)
        want = decide(signals, utilization)
        have = ready + len(pending)
        if want > have:
            pending += [minute + WARMUP_MIN] * (want - have)
        elif want < ready:
            ready = max(want, POLICY.min_replicas)  # a drained replica leaves at once
        replica_minutes += ready
        history.append(want)
    return violations, replica_minutes, history


def ours(signals, utilization):
    return recommend(signals, POLICY)[0]


def reactive_on_utilization(signals, utilization):
    """The non-starter: +1 above 80% utilization, -1 below 40%."""
    if utilization > 0.8:
        return signals.replicas + 1
    return max(1, signals.replicas - 1) if utilization < 0.4 else signals.replicas


def test_holds_the_slo_through_a_simulated_day():
    violations, replica_minutes, history = simulate(ours)
    assert violations <= 10, f"{violations} minutes over the TTFT SLO"  # measured: 5, at the spike's start
    peak = max(history)
    assert history[3 * 60] <= 3 and peak >= 8  # small at night, large at the peak
    assert min(history) >= POLICY.min_replicas and peak <= POLICY.max_replicas


def test_beats_a_utilization_reactive_scaler():
    ours_v, ours_cost, _ = simulate(ours)
    base_v, base_cost, _ = simulate(reactive_on_utilization)
    assert ours_v < base_v / 2, (ours_v, base_v)
    assert ours_cost < base_cost * 1.25  # the SLO is not bought with an idle fleet (measured: +7%)


def test_scales_down_one_at_a_time_and_only_when_calm():
    policy = Policy(ttft_slo_ms=2000, min_replicas=1, max_replicas=10, warmup_seconds=180)
    calm = Signals(replicas=6, queued=0, kv_usage=0.1, ttft_p95_ms=400, arrival_rate=0.1, service_rate=0.5)
    assert recommend(calm, policy)[0] == 5
    busy_kv = Signals(replicas=6, queued=0, kv_usage=0.5, ttft_p95_ms=400, arrival_rate=0.1, service_rate=0.5)
    assert recommend(busy_kv, policy)[0] == 6


def test_kv_pressure_and_slo_breach_scale_up_even_without_a_queue():
    policy = Policy(ttft_slo_ms=1000, min_replicas=1, max_replicas=10, warmup_seconds=180)
    hot = Signals(replicas=2, queued=0, kv_usage=0.95, ttft_p95_ms=500, arrival_rate=0.5, service_rate=1.0)
    assert recommend(hot, policy)[0] >= 3 + 1  # 2 * 0.95 / 0.75 -> 3, plus the warm buffer
    slow = Signals(replicas=2, queued=0, kv_usage=0.3, ttft_p95_ms=1500, arrival_rate=0.5, service_rate=1.0)
    replicas, reason = recommend(slow, policy)
    assert replicas >= 3 and "TTFT" in reason
