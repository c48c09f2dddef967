"""Dispatch, cancel and the sweep keep the fair queue whole (real Postgres and Redis,
no worker: the pool's queue is only read back here)."""
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from chatsite.redis_client import get_redis
from chatsite.runs import fair_queue, queues
from chatsite.runs.dispatch import message as dispatch_message
from chatsite.runs.dispatch import run_requeue
from chatsite.runs.models import GenerationRun
from chatsite.runs.admission import run_submit
from chatsite.runs.services import run_cancel, run_claim, run_release
from chatsite.runs.services.sweep import runs_sweep
from tests.factories import ChatFactory, TenantFactory, UserFactory, queueing_pool
from tests.runs.helpers import queued_messages

pytestmark = pytest.mark.django_db
POOL, TIER = "fair-pool", "interactive"


@pytest.fixture
def fair_pool(db):
    pool = queueing_pool(POOL)  # no worker consumes it
    yield pool
    r = get_redis()
    r.delete(queues.pool_queue(POOL, TIER), *(r.keys(f"fair:{pool.name}:*") or ["-"]))


@pytest.fixture
def submit(fair_pool, django_capture_on_commit_callbacks):
    """Admit a run in a chat of its own for `tenant`, its dispatch run as on commit."""
    def submit(tenant, **kw):
        chat = ChatFactory(tenant=tenant, owner=UserFactory(tenant=tenant), pool=fair_pool)
        with django_capture_on_commit_callbacks(execute=True):
            return run_submit(chat=chat, content="hello", **kw)
    return submit


def depths(pool):
    return fair_queue.depths(pool=pool.name, tier=TIER)


def test_a_dispatched_run_is_recorded_and_its_message_is_a_wake_up_for_its_tier(submit, fair_pool, tenant):
    run = submit(tenant)
    assert depths(fair_pool) == {tenant.pk: 1}
    assert queued_messages(queues.pool_queue(POOL, TIER)) == [([run.pk], {"tier": TIER})]


def test_with_the_fair_queue_off_each_message_serves_the_run_it_names(submit, fair_pool, tenant):
    with override_settings(CHATSITE={**settings.CHATSITE, "FAIR_QUEUE": False}):
        run = submit(tenant)
    assert depths(fair_pool) == {}
    assert queued_messages(queues.pool_queue(POOL, TIER)) == [([run.pk], {})]


def test_a_run_the_fair_queue_could_not_record_is_served_by_its_own_message(submit, fair_pool, tenant, monkeypatch):
    def down(**_):
        raise redis.ConnectionError("Redis went away for a moment")

    monkeypatch.setattr(fair_queue, "push", down)
    run = submit(tenant)
    assert queued_messages(queues.pool_queue(POOL, TIER)) == [([run.pk], {})]


def test_cancel_of_a_queued_run_takes_it_out_of_the_fair_queue(submit, fair_pool, tenant):
    run, other = submit(tenant), submit(TenantFactory())
    assert run_cancel(run=run).status == "cancelled"
    assert depths(fair_pool) == {other.tenant_id: 1}
    assert fair_queue.pop(pool=fair_pool.name, tier=TIER).run_id == other.pk


def test_a_handed_back_run_goes_back_first_among_its_tenants_runs(submit, fair_pool, tenant):
    first = submit(tenant)
    assert fair_queue.pop(pool=fair_pool.name, tier=TIER).run_id == first.pk  # a worker takes it
    claim = run_claim(run_id=first.pk, worker="draining-worker")
    later = submit(tenant)
    run_release(run_id=first.pk, lease_token=claim.lease_token)  # the drain hands it back...
    run_requeue(run_id=first.pk, pool=fair_pool.name, tier=TIER, tenant_id=tenant.pk)  # ...and generation sends it back
    assert [fair_queue.pop(pool=fair_pool.name, tier=TIER).run_id for _ in range(2)] == [first.pk, later.pk]


def age(run, seconds):
    GenerationRun.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(seconds=seconds))


def test_the_sweep_re_adds_a_queued_run_admitted_while_redis_failed(submit, fair_pool, tenant, monkeypatch):
    def down(*_, **__):
        raise redis.ConnectionError("Redis went away for a moment")

    with monkeypatch.context() as m:  # both the fair queue and the broker are that Redis
        m.setattr(fair_queue, "push", down)
        m.setattr(dispatch_message, "send_generate", down)
        run = submit(tenant)
    assert depths(fair_pool) == {} and queued_messages(queues.pool_queue(POOL, TIER)) == []
    age(run, 20)  # past PINNED_GRACE, well within QUEUED_GRACE
    assert runs_sweep()["redispatched"] == 1
    assert depths(fair_pool) == {tenant.pk: 1}
    assert queued_messages(queues.pool_queue(POOL, TIER)) == [([run.pk], {"tier": TIER})]


def test_the_sweep_leaves_a_recorded_run_to_wait_its_turn(submit, fair_pool, tenant):
    run = submit(tenant)
    age(run, 20)
    assert runs_sweep()["redispatched"] == 0
    assert len(queued_messages(queues.pool_queue(POOL, TIER))) == 1


def test_a_run_the_sweep_dispatches_again_is_recorded_once(submit, fair_pool, tenant):
    run = submit(tenant)
    age(run, 400)  # past QUEUED_GRACE: its message may have been lost
    assert runs_sweep()["redispatched"] == 1
    assert depths(fair_pool) == {tenant.pk: 1}  # one place in the queue, two wake-ups
    assert queued_messages(queues.pool_queue(POOL, TIER)) == [([run.pk], {"tier": TIER})] * 2
