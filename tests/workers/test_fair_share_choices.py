"""Issue 44 item 2: a call's n choices count against the tenant's share like as many
single runs. Choices are pinned together to one worker (its prefix cache computes their
prompt once); pinned or not, one tenant holds at most WORKER_SLOTS of a worker's
threads, so the reserve threads stay free and another tenant's run starts at once.
Live: daphne, a fake-engine worker with 4 slots and 1 reserve thread, real Redis."""
import threading
import time

import httpx
import pytest

from chatsite.runs.models import GenerationRun
from chatsite.tenancy.services import api_key_create
from tests.factories import TenantFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

POOL = "share-pool"
SLOTS = 4


@pytest.fixture(scope="module")
def small_worker(start_pool_worker):
    return start_pool_worker("share", pool=POOL, step_seconds=0.02,
                             pool_fields={"max_output_tokens": 2000, "context_length": 4096},
                             CHATSITE_WORKER_SLOTS=SLOTS, CHATSITE_WORKER_RESERVE_SLOTS=1)


def _key(tenant) -> str:
    return api_key_create(user=UserFactory(tenant=tenant), tenant=tenant, name="k")[1]


def _call(live_url, key, **body):
    return httpx.post(f"{live_url}/v1/chat/completions", timeout=120, headers={"Authorization": f"Bearer {key}"},
                      json={"model": POOL, "messages": [{"role": "user", "content": "go"}], **body})


@pytest.mark.slow
def test_a_flood_of_n_choices_leaves_room_for_another_tenants_run(live_url, small_worker):
    flood, quiet = TenantFactory(), TenantFactory()
    flood_key, quiet_key = _key(flood), _key(quiet)
    # 3 calls of 4 choices, 300 tokens each (~6 s a run): 12 runs for a worker of 4 + 1 threads.
    calls = [threading.Thread(target=_call, args=(live_url, flood_key),
                              kwargs={"n": SLOTS, "max_tokens": 300, "ignore_eos": True}) for _ in range(3)]
    for call in calls:
        call.start()
    deadline = time.monotonic() + 30
    while GenerationRun.objects.filter(tenant=flood, status="running").count() < SLOTS:
        assert time.monotonic() < deadline, "the flood's runs did not start"
        time.sleep(0.1)
    answer = _call(live_url, quiet_key, max_tokens=5)
    assert answer.status_code == 200, answer.text
    run = GenerationRun.objects.get(tenant=quiet)
    waited = (run.started_at - run.queued_at).total_seconds()
    still_running = GenerationRun.objects.filter(tenant=flood, status="running").count()
    print(f"the quiet tenant's run waited {waited:.2f} s for a thread; the flood held {still_running} running")
    assert waited < 3.0, f"the quiet tenant's run waited {waited:.1f} s behind the flood's choices"
    assert GenerationRun.objects.filter(tenant=flood, status__in=["queued", "running"]).exists()  # flood not over
    assert GenerationRun.objects.filter(tenant=flood, status="running").count() <= SLOTS  # its share, no more
    for call in calls:
        call.join(120)
    assert GenerationRun.objects.filter(tenant=flood, status="completed").count() == 3 * SLOTS
