"""Which way a worker drains on SIGTERM: its runs handed over at once while another worker
of the pool takes work, left to finish when none does."""
import pytest
from django.conf import settings
from django.test import override_settings

from tests.heartbeat import beat, gone
from workers import drain

POOL = "drain-mode"
ME = "dm-me@host"


@pytest.fixture(autouse=True)
def workers():
    names: list[str] = []
    yield names
    for name in [ME, *names]:
        gone(name, POOL)


def test_a_sigterm_hands_over_when_another_worker_of_the_pool_takes_work(workers):
    beat(ME, POOL)
    workers.append("dm-other@host")
    beat("dm-other@host", POOL)
    assert drain.shutdown_mode(pool=POOL, worker_name=ME) == drain.HANDOFF


@pytest.mark.parametrize("other", [None, {"draining": True}, {"ready": False}, {"pool": "elsewhere"},
                                   {"age": 10.0}])
def test_a_sigterm_lets_runs_finish_when_no_other_worker_takes_work(workers, other):
    beat(ME, POOL)
    if other is not None:
        workers.append("dm-other@host")
        pool = other.pop("pool", POOL)
        beat("dm-other@host", pool, **other)
    assert drain.shutdown_mode(pool=POOL, worker_name=ME) == drain.FINISH


def test_an_operator_who_asks_for_finish_gets_it(workers):
    beat(ME, POOL)
    workers.append("dm-other@host")
    beat("dm-other@host", POOL)
    with override_settings(CHATSITE={**settings.CHATSITE, "DRAIN_MODE": "finish"}):
        assert drain.shutdown_mode(pool=POOL, worker_name=ME) == drain.FINISH


def test_an_unknown_mode_is_refused_by_name():
    with pytest.raises(ValueError, match="handoff, finish"):
        drain.check_mode("later")
