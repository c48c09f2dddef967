"""The claim: one live attempt per run, ever.

The run's lease (chatsite.runs.stream.lease: SET NX with a TTL the worker's
heartbeat keeps extending) says an attempt is alive and fences its stream writes;
the Postgres compare-and-set then moves the run to `running` and bumps its attempt.
A redelivered task whose run is terminal, or whose run another live attempt holds,
does nothing.
"""
from dataclasses import dataclass

from django.utils import timezone

from chatsite import stage_trace
from chatsite.runs.store.claim import ClaimedRun, run_take
from chatsite.runs.store.tokens import Kept
from chatsite.runs.stream import lease, log
from chatsite.runs.stream.log import Reply


@dataclass(frozen=True, slots=True)
class Claim:
    run: ClaimedRun
    lease_token: str
    so_far: Reply  # what earlier attempts streamed, read as the lease was taken
    cancel_asked: bool
    kept: Kept  # the ids kept with the replies its prompt may start with, read with the claim


def run_claim(*, run_id: int, worker: str) -> Claim | None:
    """Take the run for a new attempt, or None if it is finished, its stream has
    ended, or a live attempt holds it. The lease, the stream so far and the cancel
    are one round trip (`log.acquire_reading`)."""
    token, so_far, cancel_asked = log.acquire_reading(run_id, worker)
    stage_trace.mark("worker.leased", run_id)
    if token is None:
        return None
    try:
        taken = run_take(run_id=run_id, worker=worker, now=timezone.now())
    except BaseException:
        lease.release(run_id, token)
        raise
    if taken is None:  # finished, or no such run
        lease.release(run_id, token)
        return None
    return Claim(run=taken.run, lease_token=token, so_far=so_far, cancel_asked=cancel_asked, kept=taken.kept)


def run_release(*, run_id: int, lease_token: str) -> None:
    """Give the run's lease up, if this attempt still holds it (it may have ended it)."""
    lease.release(run_id, lease_token)
