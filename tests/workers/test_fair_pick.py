"""A worker's wake-up against real Postgres and Redis: it serves the fair next run,
skips what is finished or held, and never serves a run twice. The engine is left
out: serving a run here ends it at once, as a finished generation would."""
from types import SimpleNamespace

import pytest

from chatsite.redis_client import get_redis
from chatsite.runs import fair_queue, queues
from chatsite.runs.models import GenerationRun
from chatsite.runs.admission import run_submit
from chatsite.runs.services import run_cancel, run_end, run_release
from chatsite.runs.stream import codec
from tests.factories import ChatFactory, TenantFactory, UserFactory, queueing_pool
from workers import fair_pick

pytestmark = pytest.mark.django_db
POOL, TIER = "fair-pick-pool", "interactive"


@pytest.fixture
def fair_pool(db):
    pool = queueing_pool(POOL)
    yield pool
    r = get_redis()
    r.delete(queues.pool_queue(POOL, TIER), *(r.keys(f"fair:{pool.name}:*") or ["-"]))


@pytest.fixture
def submit(fair_pool, django_capture_on_commit_callbacks):
    def submit(tenant):
        chat = ChatFactory(tenant=tenant, owner=UserFactory(tenant=tenant), pool=fair_pool)
        with django_capture_on_commit_callbacks(execute=True):
            return run_submit(chat=chat, content="hello", max_tokens=5)
    return submit


@pytest.fixture
def served(monkeypatch):
    """The runs the worker generated, in order; each ends (done) as it is served."""
    done: list[int] = []

    def generate_claimed(rt, claim, *, since=0.0):
        done.append(claim.run.id)
        run_end(run_id=claim.run.id, lease_token=claim.lease_token,
                fields=codec.done_fields(finish_reason="stop", prompt_tokens=3, completion_tokens=0))
        run_release(run_id=claim.run.id, lease_token=claim.lease_token)
        return "finished"

    monkeypatch.setattr(fair_pick, "generate_claimed", generate_claimed)
    monkeypatch.setattr("workers.generation.generate_claimed", generate_claimed)
    return done


def wake(pool, run, worker="w1"):
    rt = SimpleNamespace(pool=pool, worker_name=worker, draining=False)
    return fair_pick.generate_next(rt, tier=TIER, woken_by=run.pk)


def test_each_wake_up_serves_the_fair_next_run_and_every_run_once(submit, fair_pool, tenant, served):
    noisy = [submit(tenant) for _ in range(4)]
    quiet = submit(TenantFactory())
    messages = [*noisy, quiet]  # one wake-up per run, in the order they were sent
    outcomes = [wake(fair_pool, run) for run in messages]
    assert quiet.pk in served[:2]  # the quiet tenant's run is among the first two served, not the fifth
    assert sorted(served) == sorted(r.pk for r in messages) and outcomes == ["finished"] * 5
    assert GenerationRun.objects.filter(pk__in=served, status="completed").count() == 5


def test_an_extra_wake_up_finds_nothing_and_serves_nothing_twice(submit, fair_pool, tenant, served):
    run = submit(tenant)
    assert wake(fair_pool, run) == "finished"
    # a duplicate delivery, or the sweep's extra wake-up: the run's stream has ended, so it is only saved (again)
    assert wake(fair_pool, run) == "finalized"
    assert served == [run.pk]
    run.refresh_from_db()
    assert run.status == "completed" and run.attempt == 1


def test_a_cancelled_run_still_in_the_queue_is_skipped_for_the_next(submit, fair_pool, tenant, served):
    cancelled, waiting = submit(tenant), submit(TenantFactory())
    run_cancel(run=cancelled)
    # a dispatch racing the cancel recorded it again
    fair_queue.push(pool=fair_pool.name, tier=TIER, tenant_id=tenant.pk, run_id=cancelled.pk)
    assert wake(fair_pool, cancelled) == "finished"
    assert served == [waiting.pk]
    assert fair_queue.depths(pool=fair_pool.name, tier=TIER) == {}


def test_a_run_held_by_a_live_attempt_is_skipped(submit, fair_pool, tenant, served):
    from chatsite.runs.services import run_claim

    held, waiting = submit(tenant), submit(TenantFactory())
    claim = run_claim(run_id=held.pk, worker="other-worker")  # generating elsewhere (a re-dispatched duplicate)
    assert wake(fair_pool, held) == "finished"
    assert served == [waiting.pk]
    run_release(run_id=held.pk, lease_token=claim.lease_token)


def test_a_claim_that_fails_puts_the_run_back(submit, fair_pool, tenant, served, monkeypatch):
    from django.db import OperationalError

    run = submit(tenant)

    def postgres_down(*_, **__):
        raise OperationalError("the database is away")

    monkeypatch.setattr(fair_pick, "claim_timed", postgres_down)
    with pytest.raises(OperationalError):
        wake(fair_pool, run)
    assert fair_queue.depths(pool=fair_pool.name, tier=TIER) == {tenant.pk: 1}
    monkeypatch.undo()
    assert served == []


@pytest.mark.django_db(transaction=True)  # the worker threads read the rows through their own connections
def test_a_tenant_at_its_cap_leaves_a_reserve_thread_to_another_tenants_run(submit, fair_pool, tenant, monkeypatch):
    import threading
    import time

    monkeypatch.setattr(fair_pick, "tenant_cap", lambda: 1)
    first, second = submit(tenant), submit(tenant)
    finish_first, served = threading.Event(), []

    def generate_claimed(rt, claim, *, since=0.0):
        served.append(claim.run.id)
        if claim.run.id == first.pk:
            assert finish_first.wait(10)  # the flooding tenant's run is still generating
        run_end(run_id=claim.run.id, lease_token=claim.lease_token,
                fields=codec.done_fields(finish_reason="stop", prompt_tokens=3, completion_tokens=0))
        run_release(run_id=claim.run.id, lease_token=claim.lease_token)
        return "finished"

    def wake_in_thread(run):
        from django.db import connection

        try:
            wake(fair_pool, run)
        finally:
            connection.close()

    monkeypatch.setattr(fair_pick, "generate_claimed", generate_claimed)
    slot = threading.Thread(target=wake_in_thread, args=(first,))
    slot.start()
    while served != [first.pk]:
        time.sleep(0.01)
    reserve = threading.Thread(target=wake_in_thread, args=(second,))
    reserve.start()
    time.sleep(0.3)
    assert served == [first.pk]  # the tenant is at its cap: its second run waits, and so does the thread
    quiet = submit(TenantFactory())
    reserve.join(5)
    assert not reserve.is_alive() and served == [first.pk, quiet.pk]  # another tenant's run starts at once
    finish_first.set()
    slot.join(5)
    assert wake(fair_pool, quiet) == "finished" and served == [first.pk, quiet.pk, second.pk]


def test_a_reserve_thread_of_a_draining_worker_hands_its_message_back(submit, fair_pool, tenant, monkeypatch):
    from celery.exceptions import Reject

    run = submit(tenant)
    monkeypatch.setattr(fair_pick, "tenant_cap", lambda: 1)
    monkeypatch.setitem(fair_pick.held.runs, tenant.pk, 1)  # the tenant holds its cap of this worker's runs
    rt = SimpleNamespace(pool=fair_pool, worker_name="w1", draining=True)
    with pytest.raises(Reject):
        fair_pick.generate_next(rt, tier=TIER, woken_by=run.pk)
    assert fair_queue.depths(pool=fair_pool.name, tier=TIER) == {tenant.pk: 1}  # still waiting for another worker
