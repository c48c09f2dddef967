"""Which way a worker drains on SIGTERM: its runs handed over at once while another worker
of the pool takes work, left to finish when none does."""
import pytest
from django.conf import settings
from django.test import override_settings

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from tests.heartbeat import beat, gone
from workers import drain

POOL = "drain-mode"
ME = "dm-me@host"
RUNS = (990301, 990302, 990303)  # run ids of the drain's own tests (their leases and streams)


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


class _Beat:
    """The heartbeat as drain sees it: the worker holds a run while its task has it."""

    def __init__(self, writer):
        self.writer, self.held = writer, {}

    def beat_quietly(self):
        pass

    def holding(self) -> bool:
        self.held = {k: r for k, r in self.held.items() if not r.done.is_set()}  # a settled run's task releases it
        return bool(self.held)


@pytest.fixture
def worker():
    from types import SimpleNamespace

    from workers.stream_writer import StreamWriter

    keys = [k for r in RUNS for k in (redis_keys.run_stream(r), redis_keys.run_lease(r))]
    get_redis().delete(*keys)
    aborted: list[str] = []
    writer = StreamWriter(abort=aborted.append)
    rt = SimpleNamespace(writer=writer, draining=False, heartbeat=_Beat(writer))
    yield SimpleNamespace(rt=rt, aborted=aborted)
    get_redis().delete(*keys)


def _generating(worker, run_id: int, *, resumable: bool = True):
    from chatsite.runs.stream import lease
    from workers.stream_writer import ActiveRun

    run = ActiveRun(run_id=run_id, attempt=1, request_id=f"run-{run_id}-1", lease_token=lease.acquire(run_id, "w"),
                    next_seq=0,
                    resumable=resumable)
    worker.rt.writer.register(run)
    worker.rt.heartbeat.held[run.request_id] = run
    return run


def _drain_in_thread(worker, **kwargs):
    import threading

    box = {}
    thread = threading.Thread(target=lambda: box.update(took=drain.drain(worker.rt, **kwargs)), daemon=True)
    thread.start()
    return thread, box


def test_a_handoff_drain_hands_a_reply_over_at_once_and_lets_a_constrained_one_finish(worker):
    from workers.stream_writer import HANDED_BACK

    text, json_reply = _generating(worker, RUNS[0]), _generating(worker, RUNS[1], resumable=False)
    thread, box = _drain_in_thread(worker, mode=drain.HANDOFF, deadline_seconds=30)
    assert text.done.wait(5) and text.outcome == HANDED_BACK and worker.aborted == [f"run-{RUNS[0]}-1"]
    assert worker.rt.draining and not json_reply.done.is_set()  # no other worker could carry it on
    worker.rt.writer.unregister(json_reply)  # it finishes here
    json_reply.done.set()
    thread.join(10)
    assert box["took"] < 30 and worker.aborted == [f"run-{RUNS[0]}-1"]


def test_a_finish_drain_waits_for_the_deadline_then_hands_the_rest_over(worker):
    from workers.stream_writer import HANDED_BACK

    run = _generating(worker, RUNS[2])
    thread, box = _drain_in_thread(worker, mode=drain.FINISH, deadline_seconds=1.0)
    assert not run.done.wait(0.5) and worker.aborted == []  # its deadline has not passed
    assert run.done.wait(5) and run.outcome == HANDED_BACK and worker.aborted == [f"run-{RUNS[2]}-1"]
    thread.join(10)
    assert box["took"] >= 1.0
