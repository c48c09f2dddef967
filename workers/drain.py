"""Draining a worker: it takes no new work, and its runs in flight go on elsewhere.

Two modes, by name:
- `handoff` (the default): every run in flight is handed back at once, at a token
  boundary (the engine aborts it; no terminal entry), and another worker of the pool
  claims it and carries on from the run's stream at the next seq. The worker holds
  nothing within a second or two, however long its replies were going to take. A
  constrained reply (a JSON Schema, a tool call, a guide) may finish until the
  deadline first: another attempt carries it on too (its grammar advanced over the
  reply so far: inference.carried_grammar), but such a reply is mostly read whole (a
  call, a JSON value), so a hand-over only delays it.
- `finish`: runs may finish until the deadline; the rest are then handed back.

On SIGTERM (`shutdown_mode`) a `handoff` drain becomes `finish` when no other worker of
the pool is taking work: a hand-back with nobody to take it would only make the
replies wait in the queue for a worker that is not there.
"""
import logging
import time

from django.conf import settings

from chatsite.pools.health import pool_is_up, pool_workers

log = logging.getLogger(__name__)

HANDOFF, FINISH = "handoff", "finish"
MODES = (HANDOFF, FINISH)
RELEASE_WAIT_SECONDS = 10  # how long the handed-back runs' threads get to release and re-dispatch them
POLL_SECONDS = 0.02


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"drain mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def shutdown_mode(*, pool: str, worker_name: str) -> str:
    """The mode a warm shutdown drains in: CHATSITE_DRAIN_MODE, but `finish` when no
    other worker of `pool` takes work (nobody to hand the runs to)."""
    mode = check_mode(settings.CHATSITE["DRAIN_MODE"])
    if mode == HANDOFF and not pool_is_up(pool, {n: b for n, b in pool_workers(pool).items() if n != worker_name}):
        log.warning("no other worker of pool %s takes work: letting the runs finish instead of handing them over",
                    pool)
        return FINISH
    return mode


def drain(rt, *, mode: str, deadline_seconds: float) -> float:
    """Drain `rt` (workers.runtime.Runtime): stop taking work, then in `handoff` mode hand
    every run back at once (a constrained reply may finish until the deadline first), in
    `finish` mode let them all finish until the deadline and hand back the rest. Returns when the worker holds no run (its runs'
    leases released and each run dispatched again), or RELEASE_WAIT_SECONDS after the
    deadline; the seconds it took."""
    check_mode(mode)
    started = time.monotonic()
    deadline, last = started + deadline_seconds, started + deadline_seconds + RELEASE_WAIT_SECONDS
    rt.draining = True
    rt.heartbeat.beat_quietly()  # routers see "draining" at once: a re-dispatch never comes back here
    log.warning("draining (%s): %d run(s) in flight, deadline %.0f s", mode, len(rt.writer.active()), deadline_seconds)
    while True:
        now = time.monotonic()
        # again on every pass: a run claimed just before the drain began may reach the engine after it
        runs = rt.writer.active()
        if now < deadline:
            runs = [r for r in runs if r.resumable] if mode == HANDOFF else []
        if runs:
            log.warning("handing %d run(s) over to the pool's other workers", len(runs))
            rt.writer.hand_back([r.request_id for r in runs])
        if not rt.heartbeat.holding() or now > last:
            break
        time.sleep(POLL_SECONDS)
    took = time.monotonic() - started
    log.warning("drained in %.2f s", took)
    return took
