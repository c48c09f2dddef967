"""The heartbeat's lease keeping: a lease that lapsed by the worker's own clock stops
its run there, without Redis (the fault matrix's partitioned worker, row a)."""
import time
from types import SimpleNamespace

import pytest

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs.stream import lease
from inference.types import StepDelta
from workers import stream_writer
from workers.heartbeat import Heartbeat, stop_after_seconds
from workers.stream_writer import ActiveRun, StreamWriter

RUN = 990202
WORKER = "hb-test@host"


@pytest.fixture
def rig():
    aborted: list[str] = []
    writer = StreamWriter(abort=aborted.append)
    stats = SimpleNamespace(generated_tokens=0, ready=True, running=0, waiting=0, kv_cache_usage=0.0,
                            prefix_cache_hit_rate=0.0, prefix_cache_queries=0, prefix_cache_hits=0)
    rt = SimpleNamespace(writer=writer, worker_name=WORKER, draining=False, disabled=False,
                         pool=SimpleNamespace(name="hb-test"),
                         host=SimpleNamespace(stats=lambda: stats, num_active=0))
    r = get_redis()
    r.delete(redis_keys.run_stream(RUN), redis_keys.run_lease(RUN))
    yield SimpleNamespace(heartbeat=Heartbeat(rt), writer=writer, aborted=aborted)
    r.delete(redis_keys.run_stream(RUN), redis_keys.run_lease(RUN), redis_keys.worker_heartbeat(WORKER))
    r.zrem(redis_keys.workers_index(), WORKER)


def generating(rig) -> ActiveRun:
    token = lease.acquire(RUN, "w")
    run = ActiveRun(run_id=RUN, attempt=1, request_id=f"run-{RUN}-1", lease_token=token, next_seq=0)
    rig.writer.register(run)
    return run


def test_a_lease_with_no_extension_for_a_whole_lease_stops_its_run_once_before_it_lapses(rig):
    run = generating(rig)
    claimed = time.monotonic()
    rig.heartbeat.hold(RUN, run.lease_token, since=claimed)
    limit = stop_after_seconds()
    assert 1.0 < limit < lease.lease_ms() / 1000  # before Redis can let it go; beats (1 s) can extend it first
    assert rig.heartbeat.stop_lapsed(now=claimed + limit - 0.1) == set()
    assert not run.done.is_set() and rig.aborted == []
    assert rig.heartbeat.stop_lapsed(now=claimed + limit + 0.1) == {RUN}
    assert run.done.is_set() and run.outcome == stream_writer.SUPERSEDED
    assert rig.aborted == [run.request_id]  # its engine request is aborted
    assert rig.heartbeat.stop_lapsed(now=claimed + 2 * limit) == set()  # stopped once
    rig.writer.on_step([StepDelta(run.request_id, "late", 1)])
    time.sleep(0.3)
    assert get_redis().xlen(redis_keys.run_stream(RUN)) == 0  # nothing written for it


def test_an_extension_that_reached_redis_moves_the_deadline(rig):
    run = generating(rig)
    limit = stop_after_seconds()
    claimed = time.monotonic() - 0.9 * limit  # claimed a while ago, never extended so far
    rig.heartbeat.hold(RUN, run.lease_token, since=claimed)
    rig.heartbeat.beat()  # extends the lease in Redis
    assert rig.heartbeat.stop_lapsed(now=claimed + limit + 0.1) == set()
    assert not run.done.is_set()
    rig.heartbeat.drop(RUN)  # the run's task is done with it: nothing left to watch
    assert rig.heartbeat.stop_lapsed(now=claimed + 10 * limit) == set()
