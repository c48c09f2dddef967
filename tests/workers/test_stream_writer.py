"""The stream writer against real Redis, fed engine steps by hand."""
import time

import pytest

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs.stream import lease, log
from inference.types import StepDelta
from workers import stream_writer
from workers.cancel_watch import CancelWatch
from workers.stream_writer import ActiveRun, StreamWriter

RUN = 990101


@pytest.fixture
def writer():
    aborted: list[str] = []
    w = StreamWriter(abort=aborted.append)
    w.aborted = aborted
    r = get_redis()
    r.delete(redis_keys.run_stream(RUN), redis_keys.run_lease(RUN))
    r.zrem(redis_keys.cancelled_runs(), str(RUN))
    yield w
    r.delete(redis_keys.run_stream(RUN), redis_keys.run_lease(RUN))
    r.zrem(redis_keys.cancelled_runs(), str(RUN))


def active(token: str, **kw) -> ActiveRun:
    return ActiveRun(run_id=RUN, attempt=1, request_id=f"run-{RUN}-1", lease_token=token, next_seq=0, **kw)


def wait(predicate, timeout=5.0):
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_a_run_ends_with_its_tokens_then_one_terminal_entry(writer):
    run = active(lease.acquire(RUN, "w"))
    writer.register(run)
    rid = run.request_id
    writer.on_step([StepDelta(rid, "Hel", 1)])
    writer.on_step([StepDelta(rid, "lo", 1), StepDelta(rid, "", 0, finished=True, finish_reason="stop",
                                                      num_prompt_tokens=4)])
    assert run.done.wait(5) and run.outcome == stream_writer.FINISHED
    reply = log.read(RUN)
    assert reply.text == "Hello" and reply.terminal.finish_reason == "stop"
    assert reply.terminal.usage == {"prompt_tokens": 4, "completion_tokens": 2}
    assert log.has_ended(RUN)


def test_an_attempt_whose_lease_was_taken_writes_nothing_and_is_aborted(writer):
    run = active(lease.acquire(RUN, "w"))
    writer.register(run)
    writer.on_step([StepDelta(run.request_id, "a", 1)])
    wait(lambda: get_redis().xlen(redis_keys.run_stream(RUN)) == 1)
    get_redis().set(redis_keys.run_lease(RUN), "w2:other")  # another attempt took the run over
    writer.on_step([StepDelta(run.request_id, "b", 1)])
    assert run.done.wait(5) and run.outcome == stream_writer.SUPERSEDED
    assert writer.aborted == [run.request_id] and writer.active() == []
    writer.on_step([StepDelta(run.request_id, "c", 1, finished=True, finish_reason="stop")])
    time.sleep(0.3)
    assert [e.text for e in log.entries(RUN)] == ["a"]


def test_a_cancel_aborts_the_request_and_the_end_says_cancelled(writer):
    run = active(lease.acquire(RUN, "w"))
    writer.register(run)
    writer.on_step([StepDelta(run.request_id, "a", 1)])
    log.cancel_ask(RUN)
    wait(lambda: writer.aborted == [run.request_id])  # seen at the next write, or the idle poll
    assert run.cancel_requested
    writer.on_step([StepDelta(run.request_id, "", 0, finished=True, finish_reason="abort")])
    assert run.done.wait(5) and run.outcome == stream_writer.FINISHED
    assert log.read(RUN).terminal.finish_reason == "cancelled"


def test_a_pushed_cancel_aborts_the_run_at_once_and_once(writer):
    run = active(lease.acquire(RUN, "w"))
    writer.register(run)
    writer.cancel_pushed(RUN + 1)  # not a run of this worker's
    assert writer.aborted == [] and not run.cancel_requested
    writer.cancel_pushed(RUN)
    assert writer.aborted == [run.request_id] and run.cancel_requested  # before any append
    log.cancel_ask(RUN)  # the record the next append reads: the run is not aborted again
    writer.on_step([StepDelta(run.request_id, "a", 1)])
    wait(lambda: get_redis().xlen(redis_keys.run_stream(RUN)) == 1)
    writer.cancel_pushed(RUN)
    assert writer.aborted == [run.request_id]
    writer.on_step([StepDelta(run.request_id, "", 0, finished=True, finish_reason="abort")])
    assert run.done.wait(5) and log.read(RUN).terminal.finish_reason == "cancelled"


def test_a_stop_asked_is_pushed_to_the_watching_workers():
    told: list[int] = []
    watch = CancelWatch(told.append)
    watch.start()
    try:
        # Its own subscription confirmed (a live stack's workers in this database subscribe to the channel too).
        assert watch.listening.wait(5)
        log.cancel_ask(RUN)
        wait(lambda: RUN in told)
    finally:
        watch.stop()
        get_redis().zrem(redis_keys.cancelled_runs(), str(RUN))


def test_a_handed_back_run_gets_no_terminal_entry(writer):
    run = active(lease.acquire(RUN, "w"))
    writer.register(run)
    writer.on_step([StepDelta(run.request_id, "a", 1)])
    wait(lambda: get_redis().xlen(redis_keys.run_stream(RUN)) == 1)
    writer.hand_back([run.request_id])
    assert run.outcome == stream_writer.HANDED_BACK and writer.aborted == [run.request_id]
    writer.on_step([StepDelta(run.request_id, "", 0, finished=True, finish_reason="abort")])
    time.sleep(0.3)
    assert log.read(RUN).terminal is None and not log.has_ended(RUN)


def test_a_logprobs_run_writes_its_tokens_logprobs_and_a_plain_run_does_not(writer):
    from chatsite.runs.stream import codec
    from inference.types import DetailStepDelta, TokenLogprob

    run = active(lease.acquire(RUN, "w"), logprobs=True)
    writer.register(run)
    rid = run.request_id
    a, b = TokenLogprob("Hel", -0.1, (("Hel", -0.1), ("He", -2.5))), TokenLogprob("lo", -0.7, (("lo", -0.7),))
    writer.on_step([DetailStepDelta(rid, "Hel", 1, logprobs=(a,))])
    writer.on_step([DetailStepDelta(rid, "lo", 1, logprobs=(b,)),
                    StepDelta(rid, "", 0, finished=True, finish_reason="stop", num_prompt_tokens=4)])
    assert run.done.wait(5) and run.outcome == stream_writer.FINISHED
    raw = get_redis().xrange(redis_keys.run_stream(RUN))
    assert {f for _, fields in raw for f in fields} == {codec.LOGPROBS_TOKEN_FIELD, codec.DONE_FIELD}
    reply = log.read(RUN)
    assert reply.text == "Hello" and reply.logprobs == [["Hel", -0.1, [["Hel", -0.1], ["He", -2.5]]],
                                                        ["lo", -0.7, [["lo", -0.7]]]]


def test_a_run_that_did_not_ask_writes_plain_token_entries(writer):
    from chatsite.runs.stream import codec

    run = active(lease.acquire(RUN, "w"))
    writer.register(run)
    writer.on_step([StepDelta(run.request_id, "Hi", 1),
                    StepDelta(run.request_id, "", 0, finished=True, finish_reason="stop")])
    assert run.done.wait(5)
    raw = get_redis().xrange(redis_keys.run_stream(RUN))
    assert {f for _, fields in raw for f in fields} == {codec.TOKEN_FIELD, codec.DONE_FIELD}
    assert log.read(RUN).logprobs is None


def test_a_run_that_asked_for_details_writes_them_and_the_prompts_in_its_first_entry_only(writer):
    from inference.types import DetailStepDelta, PromptLogprob

    run = active(lease.acquire(RUN, "w"), token_ids=True, prompt_extra={"prompt_ids": [5, 6]}, prompt_logprobs=True)
    writer.register(run)
    rid, prompt = run.request_id, (None, PromptLogprob(6, "b", -1.5, 2, ((7, "c", -0.5),)))
    writer.on_step([DetailStepDelta(rid, "Hel", 1, token_ids=(11,), prompt_logprobs=prompt)])
    writer.on_step([DetailStepDelta(rid, "lo", 1, token_ids=(12,)),
                    StepDelta(rid, "", 0, finished=True, finish_reason="stop", num_prompt_tokens=2,
                              num_cached_tokens=16)])
    assert run.done.wait(5) and run.outcome == stream_writer.FINISHED
    reply = log.read(RUN)
    assert reply.text == "Hello" and reply.logprobs is None  # not asked for
    assert reply.details == {"ids": [11, 12], "prompt_ids": [5, 6], "prompt_logprobs": [None, [6, "b", -1.5, 2,
                                                                                            [[7, "c", -0.5]]]],
                             "cached_tokens": 2}  # no more cached than the prompt billed


def test_a_request_the_engine_refuses_ends_the_run_with_a_client_error(writer):
    from chatsite.runs.stream import codec
    from inference.types import REFUSED_PREFIX

    run = active(lease.acquire(RUN, "w"))
    writer.register(run)
    writer.on_step([StepDelta(run.request_id, "", 0, finished=True, error=f"{REFUSED_PREFIX}bad regex")])
    assert run.done.wait(5) and run.outcome == stream_writer.FAILED
    terminal = log.read(RUN).terminal
    assert (terminal.code, terminal.message) == (codec.REFUSED_CODE, "bad regex")


def test_the_coalescing_window_grows_with_the_runs_streaming():
    window = stream_writer.coalesce_window
    assert window(0, 0.02, 0.05, 16) == window(1, 0.02, 0.05, 16) == 0.02  # a user watching alone: 50 a second
    assert window(16, 0.02, 0.05, 16) == window(200, 0.02, 0.05, 16) == 0.05  # busy: 20 a second, no more
    assert window(6, 0.02, 0.05, 16) == pytest.approx(0.03)  # a straight line in between
    assert window(8, 0.02, 0.02, 16) == 0.02  # busy no longer than light: one window
    assert window(8, 0.0, 0.0, 16) == 0.0  # both zero: no coalescing at all
    assert window(3, 0.02, 0.05, 1) == 0.05


def test_the_writer_s_window_follows_its_registered_runs(writer):
    assert writer.window() == stream_writer.coalesce_window(0)
    runs = [ActiveRun(run_id=RUN + i, attempt=1, request_id=f"w-{i}", lease_token="t", next_seq=3)
            for i in range(stream_writer.COALESCE_BUSY_RUNS)]
    for run in runs:
        writer.register(run)
    assert writer.window() == stream_writer.COALESCE_BUSY_SECONDS > stream_writer.COALESCE_SECONDS
    for run in runs:
        writer.unregister(run)
    assert writer.window() == stream_writer.COALESCE_SECONDS


def test_a_stopped_runs_end_is_not_held_back_by_the_window_its_tokens_wait(writer, monkeypatch):
    monkeypatch.setattr(stream_writer, "coalesce_window", lambda runs: 1.0)  # a window long enough to see
    run = active(lease.acquire(RUN, "w"))
    writer.register(run)
    writer.on_step([StepDelta(run.request_id, "a", 1)])  # the first token: written at once
    wait(lambda: get_redis().xlen(redis_keys.run_stream(RUN)) == 1)
    log.cancel_ask(RUN)
    started = time.monotonic()
    writer.on_step([StepDelta(run.request_id, "b", 1)])
    wait(lambda: writer.aborted == [run.request_id], timeout=3)
    assert time.monotonic() - started >= 0.9  # a later token waits for the window
    started = time.monotonic()
    writer.on_step([StepDelta(run.request_id, "c", 1, finished=True, finish_reason="abort")])
    assert run.done.wait(3) and time.monotonic() - started < 0.5  # the stop does not: a send now waits on it
    reply = log.read(RUN)
    assert reply.text == "abc" and reply.terminal.finish_reason == "cancelled"


def test_a_stop_that_ends_within_another_steps_window_cuts_the_window_short(writer, monkeypatch):
    monkeypatch.setattr(stream_writer, "coalesce_window", lambda runs: 1.0)
    run = active(lease.acquire(RUN, "w"))
    writer.register(run)
    writer.on_step([StepDelta(run.request_id, "a", 1)])
    wait(lambda: get_redis().xlen(redis_keys.run_stream(RUN)) == 1)
    writer.cancel_pushed(RUN)
    assert writer.aborted == [run.request_id]
    started = time.monotonic()
    writer.on_step([StepDelta(run.request_id, "b", 1)])  # a token: the writer gathers for a window
    time.sleep(0.05)
    writer.on_step([StepDelta(run.request_id, "c", 1, finished=True, finish_reason="abort")])  # the abort's end
    assert run.done.wait(3) and time.monotonic() - started < 0.5  # written with it, not a window later
    reply = log.read(RUN)
    assert reply.text == "abc" and reply.terminal.finish_reason == "cancelled"


def test_a_runs_first_token_within_another_runs_window_is_not_held(writer, monkeypatch):
    monkeypatch.setattr(stream_writer, "coalesce_window", lambda runs: 1.0)
    other_id = RUN + 1
    r = get_redis()
    r.delete(redis_keys.run_stream(other_id), redis_keys.run_lease(other_id))
    try:
        first = active(lease.acquire(RUN, "w"))
        writer.register(first)
        writer.on_step([StepDelta(first.request_id, "a", 1)])
        wait(lambda: r.xlen(redis_keys.run_stream(RUN)) == 1)
        other = ActiveRun(run_id=other_id, attempt=1, request_id=f"run-{other_id}-1",
                          lease_token=lease.acquire(other_id, "w"), next_seq=0)
        writer.register(other)
        started = time.monotonic()
        writer.on_step([StepDelta(first.request_id, "b", 1)])  # the first run's token opens a window
        time.sleep(0.05)
        writer.on_step([StepDelta(other.request_id, "x", 1)])  # the new run's first token: its TTFT
        wait(lambda: r.xlen(redis_keys.run_stream(other_id)) == 1, timeout=3)
        assert time.monotonic() - started < 0.5
        assert log.read(RUN).text == "ab"  # the window's steps go with it
    finally:
        r.delete(redis_keys.run_stream(other_id), redis_keys.run_lease(other_id))
