"""Fairness on the live stack: daphne, a real Celery worker with two slots and the fake
engine. A tenant that floods a pool does not make another tenant's run wait behind it."""
from concurrent.futures import ThreadPoolExecutor

import pytest

from chatsite.runs.models import GenerationRun
from chatsite.tenancy.services import api_key_create
from tests.factories import ChatFactory, PoolFactory, TenantFactory, UserFactory
from tests.runs.helpers import post_message, wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)
POOL, SLOTS, FLOOD = "fair-live", 2, 20


# this test is about order, not shedding: a flood's expected wait is never refused
POOL_FIELDS = {"max_output_tokens": 512, "max_queue_wait_seconds": 100000}


def _pool():
    return PoolFactory(name=POOL, **POOL_FIELDS)


@pytest.fixture(scope="module")
def two_slot_worker(start_pool_worker):
    return start_pool_worker("fair-live", pool=POOL, pool_fields=POOL_FIELDS, CHATSITE_WORKER_SLOTS=SLOTS)


@pytest.mark.slow
def test_a_quiet_tenants_run_starts_before_most_of_a_flooding_tenants(live_url, two_slot_worker, tenant, user, auth):
    pool = _pool()  # transactional tests flush rows: the same name again, as the worker knows it
    noisy_chats = [ChatFactory(tenant=tenant, owner=user, pool=pool) for _ in range(FLOOD)]
    quiet_tenant = TenantFactory()
    quiet_user = UserFactory(tenant=quiet_tenant)
    _, secret = api_key_create(user=quiet_user, tenant=quiet_tenant, name="quiet")
    quiet_chat = ChatFactory(tenant=quiet_tenant, owner=quiet_user, pool=pool)
    body = {"max_tokens": 60, "ignore_eos": True}  # ~0.6 s each: two at a time, the flood takes ~6 s
    with ThreadPoolExecutor(4) as ex:
        noisy = list(ex.map(lambda c: post_message(live_url, auth, c.pk, content="flood", **body), noisy_chats))
    quiet = post_message(live_url, {"Authorization": f"Bearer {secret}"}, quiet_chat.pk, content="hello", **body)
    saved_quiet = wait_terminal(quiet["id"])
    for run in noisy:
        wait_terminal(run["id"])
    runs = GenerationRun.objects.filter(pk__in=[r["id"] for r in noisy])
    waiting_when_quiet_came = runs.filter(started_at__gt=saved_quiet.queued_at).count()
    started_ahead_of_quiet = runs.filter(started_at__gt=saved_quiet.queued_at,
                                         started_at__lt=saved_quiet.started_at).count()
    assert saved_quiet.status == "completed" and runs.filter(status="completed").count() == FLOOD
    assert waiting_when_quiet_came >= FLOOD // 2  # most of the flood was still queued when the quiet run came
    # in FIFO order all of those would start first; in fair order the quiet run takes the next free slot
    assert started_ahead_of_quiet <= SLOTS, (started_ahead_of_quiet, waiting_when_quiet_came)
