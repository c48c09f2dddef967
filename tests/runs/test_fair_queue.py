"""The fair queue's pick order against real Redis: round robin between the tenants
with runs waiting in one (pool, tier), each tenant's runs oldest first, every run
popped once."""
import itertools

import pytest

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs import fair_queue

_pools = itertools.count()
TIER = "interactive"


@pytest.fixture
def pool():
    """A (pool, tier) of this test's own: nothing else pushes to it."""
    name = f"fair-unit-{next(_pools)}"
    yield name
    r = get_redis()
    r.delete(*r.keys(f"fair:{name}*") or ["-"])


def push(pool, tenant, *run_ids, tier=TIER):
    return [fair_queue.push(pool=pool, tier=tier, tenant_id=tenant, run_id=run) for run in run_ids]


def drain(pool, tier=TIER):
    picks = []
    while (picked := fair_queue.pop(pool=pool, tier=tier)) is not None:
        picks.append((picked.tenant_id, picked.run_id))
    return picks


def test_a_tenant_with_one_run_is_served_within_two_picks_of_one_with_twenty(pool):
    push(pool, 1, *range(100, 120))
    push(pool, 2, 500)
    first_two = [fair_queue.pop(pool=pool, tier=TIER) for _ in range(2)]
    assert (2, 500) in [(p.tenant_id, p.run_id) for p in first_two]


def test_a_tenant_arriving_while_another_is_being_served_is_next(pool):
    push(pool, 1, *range(100, 120))
    assert [fair_queue.pop(pool=pool, tier=TIER).run_id for _ in range(5)] == [100, 101, 102, 103, 104]
    push(pool, 2, 500)
    assert fair_queue.pop(pool=pool, tier=TIER).run_id == 500


def test_tenants_take_turns_each_oldest_first_and_every_run_is_popped_once(pool):
    push(pool, 1, 10, 11, 12, 13)
    push(pool, 2, 20, 21)
    push(pool, 3, 30)
    picks = drain(pool)
    assert sorted(run for _, run in picks) == [10, 11, 12, 13, 20, 21, 30]
    tenants = [t for t, _ in picks]
    assert sorted(tenants[:3]) == [1, 2, 3] and sorted(tenants[3:5]) == [1, 2] and tenants[5:] == [1, 1]
    for tenant in (1, 2, 3):
        mine = [run for t, run in picks if t == tenant]
        assert mine == sorted(mine)
    assert fair_queue.pop(pool=pool, tier=TIER) is None
    assert not get_redis().exists(redis_keys.fair_tenants(pool, TIER))  # nothing left behind


def test_an_idle_tenant_banks_no_turns(pool):
    push(pool, 1, *range(100, 130))
    for _ in range(10):  # tenant 1 alone: it uses the whole pool
        assert fair_queue.pop(pool=pool, tier=TIER).tenant_id == 1
    push(pool, 2, *range(500, 510))
    tenants = [fair_queue.pop(pool=pool, tier=TIER).tenant_id for _ in range(10)]
    assert tenants.count(2) == 5 and tenants.count(1) == 5  # alternating, not ten of tenant 2 first


def test_pushing_a_run_twice_records_it_once(pool):
    assert push(pool, 1, 10, 10) == [True, False]
    push(pool, 2, 20)
    push(pool, 1, 11, 10)
    # tenant 1 has one place in the rotation however often it is pushed
    assert [t for t, _ in drain(pool)] == [1, 2, 1]


def test_a_removed_run_is_never_popped_and_an_emptied_tenant_leaves_the_rotation(pool):
    push(pool, 1, 10, 11)
    push(pool, 2, 20)
    assert fair_queue.remove(pool=pool, tier=TIER, tenant_id=2, run_id=20)
    assert not fair_queue.remove(pool=pool, tier=TIER, tenant_id=2, run_id=20)
    assert fair_queue.depths(pool=pool, tier=TIER) == {1: 2}
    push(pool, 2, 21)  # tenant 2 comes back: one turn, not two
    assert drain(pool) == [(1, 10), (2, 21), (1, 11)]


def test_a_run_put_back_goes_first_among_its_tenants_runs(pool):
    push(pool, 1, 10, 11, 12)
    assert fair_queue.pop(pool=pool, tier=TIER).run_id == 10
    push(pool, 1, 10)  # handed back by a draining worker
    assert [run for _, run in drain(pool)] == [10, 11, 12]


def test_tiers_and_pools_are_separate_queues(pool):
    push(pool, 1, 10)
    push(pool, 1, 11, tier="batch")
    push(pool + "-other", 1, 12)
    try:
        assert drain(pool) == [(1, 10)]
        assert drain(pool, tier="batch") == [(1, 11)]
    finally:
        assert drain(pool + "-other") == [(1, 12)]


def test_a_tenant_passed_over_keeps_its_turn_and_only_its_runs_waiting_answers_wait(pool):
    push(pool, 1, 10, 11)
    push(pool, 2, 20)
    assert fair_queue.pop(pool=pool, tier=TIER, skip=["1"]).run_id == 20  # tenant 1 is at its cap on this worker
    assert fair_queue.pop(pool=pool, tier=TIER, skip=["1"]) == fair_queue.WAIT
    assert fair_queue.depths(pool=pool, tier=TIER) == {1: 2}  # nothing of tenant 1's was taken
    assert drain(pool) == [(1, 10), (1, 11)]
    assert fair_queue.pop(pool=pool, tier=TIER, skip=["1"]) is None  # nothing waits at all


def test_a_recorded_run_rings_the_bell_a_waiting_thread_blocks_on(pool):
    import time

    started = time.monotonic()
    assert not fair_queue.wait_for_push(pool=pool, tier=TIER, timeout=0.2)  # nothing recorded: it times out
    assert time.monotonic() - started >= 0.15
    push(pool, 1, 10, 10)  # the second push records nothing and rings nothing
    assert fair_queue.wait_for_push(pool=pool, tier=TIER, timeout=1)
    assert not fair_queue.wait_for_push(pool=pool, tier=TIER, timeout=0.1)
