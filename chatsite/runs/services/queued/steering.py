"""Who starts a steered message: the send-now request that stopped the reply, not the reply's
end (chatsite.runs.services.queued).

A send now waits for the stop it asked to be written, then saves the stopped reply and
starts the message itself: a web process admits it faster than the stopped run's worker,
whose process is busy with its engine, and whose try (its save's signal) would otherwise
race the request's for the chat's lock and hold the worker's process as the steered run
reaches it. From the stop's ask until the message is started, a Redis marker says so, and a
run's end leaves the message to the request; a stopped run saved while it is set ends
"interrupted" (runs.services.finalize), though the message naming it may not be committed yet.

Exact, not a race: the run's end reads the marker after its stop is written. A request
whose wait is over without the stop clears the marker, then looks whether the stop is
written: one of the two sees the other, and a request that finds no stop leaves the message
to the run's end, whenever it comes. A request that dies while waiting leaves its marker to
expire; the sweep starts that queue (queues_sweep)."""
from contextlib import contextmanager

from chatsite import redis_keys
from chatsite.redis_client import get_redis

MARGIN_SECONDS = 5  # the marker outlives the request's wait and start; a request slowed past it: the run's end starts it


@contextmanager
def awaited(run_id: int, *, seconds: float):
    """Marks `run_id`'s stop as awaited by this request (which starts the message) for up to
    `seconds` (+ a margin)."""
    r = get_redis()
    r.set(redis_keys.run_steering(run_id), 1, px=int((seconds + MARGIN_SECONDS) * 1000))
    try:
        yield
    finally:
        r.delete(redis_keys.run_steering(run_id))


def is_awaited(run_id: int) -> bool:
    """Whether a send-now request waits for this run's stop (it starts the message itself)."""
    return bool(get_redis().exists(redis_keys.run_steering(run_id)))
