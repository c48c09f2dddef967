"""The beat sweep against real Postgres and Redis, without workers: each orphaned run
reconverges, and one run that cannot be handled never stops the others."""
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from chatsite.redis_client import get_redis
from chatsite.runs import fair_queue, queues
from chatsite.runs.dispatch import message, run_dispatch
from chatsite.runs.models import GenerationRun
from chatsite.runs.admission import run_submit
from chatsite.runs.services import run_claim
from chatsite.runs.services import sweep as sweep_module
from chatsite.runs.services.sweep import run_reconverge, runs_sweep
from chatsite.runs.stream import codec, lease, log
from tests.factories import ChatFactory, queueing_pool
from tests.runs.helpers import xadd_tokens

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool(db):
    """A pool no worker consumes: a run the sweep sends again stays in its queue. (Once a live
    test started the session's fake workers, the flagship's would take the message and hold
    the run's lease for a moment, though the run, not committed, is not there for it.)"""
    return queueing_pool("sweep-pool")


def orphan(chat, *parts, start=0):
    """A running run whose worker died: claimed once, lease lapsed, tokens in its stream."""
    run = run_submit(chat=chat, content="hello", max_tokens=20)
    claim = run_claim(run_id=run.pk, worker="dead-worker")
    lease.release(run.pk, claim.lease_token)  # as its lease lapses
    GenerationRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(minutes=1))
    xadd_tokens(run.pk, list(parts), start=start)
    return run


def test_a_run_whose_stream_has_a_gap_fails_cleanly_and_the_chat_goes_on(chat):
    run = orphan(chat, "a", "b")
    xadd_tokens(run.pk, ["z"], start=5)  # entries 2..4 were lost
    counts = runs_sweep()
    assert counts["failed"] == 1 and counts["errors"] == 0
    run.refresh_from_db()
    assert run.status == "failed" and run.error.startswith("stream_gap: ")
    assert run.assistant_message.content == "ab" and run.completion_tokens == 2
    assert log.entries(run.pk)[-1].code == codec.GAP_CODE  # the stream ends, with the reason
    assert run_submit(chat=chat, content="next").status == "queued"  # nothing left in progress


def test_an_ended_stream_whose_worker_died_before_saving_is_finalized(chat):
    run = run_submit(chat=chat, content="hello", max_tokens=20)
    claim = run_claim(run_id=run.pk, worker="dead-worker")
    xadd_tokens(run.pk, ["fine"])
    log.end(run_id=run.pk, lease_token=claim.lease_token,
            fields=codec.done_fields(finish_reason="stop", prompt_tokens=3, completion_tokens=1))
    GenerationRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(minutes=1))
    assert runs_sweep()["finalized"] == 1
    run.refresh_from_db()
    assert run.status == "completed" and run.assistant_message.content == "fine"


def test_a_run_no_attempt_holds_is_dispatched_again_once_per_guard_window(chat):
    run = orphan(chat, "a")
    assert runs_sweep()["redispatched"] == 1
    assert runs_sweep()["redispatched"] == 0  # the guard holds while the dispatch is in flight
    run.refresh_from_db()
    assert run.status == "running"


def test_a_run_whose_next_attempt_lapsed_too_is_dispatched_again_at_once(chat):
    """The guard is the dispatch's, not the run's: once an attempt took the run, that attempt
    lapsing (its worker paused again) sends the run again within the same guard window."""
    run = orphan(chat, "a")
    assert run_reconverge(run_id=run.pk) == "redispatched"
    claim = run_claim(run_id=run.pk, worker="paused-again")  # attempt 2 took it, then lapsed
    lease.release(run.pk, claim.lease_token)
    assert run_reconverge(run_id=run.pk) == "redispatched"
    assert run_reconverge(run_id=run.pk) is None  # that dispatch is in flight: guarded


def test_one_run_that_cannot_be_handled_does_not_stop_the_sweep(chat, tenant, user, pool, monkeypatch):
    broken = orphan(chat, "a")
    other = orphan(ChatFactory(tenant=tenant, owner=user, pool=pool), "b")
    xadd_tokens(other.pk, ["z"], start=4)  # a gap: the sweep fails it
    real_read = log.read

    def read(run_id, **kw):
        if run_id == broken.pk:
            raise RuntimeError("unreadable")
        return real_read(run_id, **kw)

    monkeypatch.setattr(sweep_module.log, "read", read)
    counts = runs_sweep()
    assert counts["errors"] == 1 and counts["failed"] == 1
    other.refresh_from_db()
    assert other.status == "failed"


def test_a_waiting_run_whose_wake_up_was_lost_gets_another(chat):
    """A worker paused in its blocking pop takes a wake-up off the broker's list and dies
    before kombu records it as unacknowledged: the run stays in the fair queue with no
    message to wake a worker for it. Past UNWOKEN_GRACE the sweep sends another, once per guard
    window; a run whose wake-up still waits is left alone."""
    run = run_submit(chat=chat, content="hello", max_tokens=20)
    queue = queues.pool_queue(chat.pool.name, run.tier)
    r = get_redis()
    r.delete(queue)  # earlier tests' messages, left in this pool's queue
    run_dispatch(run)  # as on its commit (this test's transaction never commits)
    GenerationRun.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(seconds=3))
    assert message.messages_waiting([queue]) == {queue: 1}
    r.delete(queue)  # taken by the worker that died
    assert message.messages_waiting([queue]) == {queue: 0}
    assert runs_sweep()["redispatched"] == 0  # a live worker's pop may still be on its way
    GenerationRun.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(seconds=6))
    assert runs_sweep()["redispatched"] == 1  # past UNWOKEN_GRACE, well within PINNED_GRACE
    assert message.messages_waiting([queue]) == {queue: 1}
    assert json.loads(json.loads(r.lindex(queue, 0))["headers"]["argsrepr"]) == [run.pk]
    assert fair_queue.waiting([run]) == {run.pk: True}  # recorded once, as before
    assert runs_sweep()["redispatched"] == 0  # its wake-up waits in the queue
    r.delete(queue)
    assert runs_sweep()["redispatched"] == 0  # that dispatch is in flight: guarded


def test_a_broker_that_cannot_count_its_queues_does_not_stop_the_sweep(chat, monkeypatch):
    run = orphan(chat, "a")  # a running run whose worker died: dispatched again all the same

    def away(queues):
        raise ConnectionError("the broker is away")

    monkeypatch.setattr(sweep_module.message, "messages_waiting", away)
    waiting = run_submit(chat=ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=chat.pool), content="later")
    run_dispatch(waiting)
    GenerationRun.objects.filter(pk=waiting.pk).update(queued_at=timezone.now() - timedelta(seconds=20))
    counts = runs_sweep()
    assert counts["redispatched"] == 1 and counts["errors"] == 0
    run.refresh_from_db()
    assert run.status == "running"
