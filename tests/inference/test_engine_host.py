"""The engine host hands every step of all requests to the sink in one call."""
import threading
import time

from inference.engine_host import EngineHost
from inference.fake_backend import FakeBackend
from inference.types import GenerationRequest


def collect_host(step_seconds=0.005):
    batches, lock = [], threading.Lock()

    def on_step(deltas):
        with lock:
            batches.append(list(deltas))

    host = EngineHost(FakeBackend(step_seconds=step_seconds), on_step)
    host.start()
    return host, batches


def wait_finished(batches, n, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done = {d.request_id for b in batches for d in b if d.finished}
        if len(done) >= n:
            return done
        time.sleep(0.01)
    raise TimeoutError


def test_concurrent_requests_share_steps_and_all_finish():
    host, batches = collect_host()
    try:
        for i in range(8):
            host.submit(GenerationRequest(f"r{i}", [1, 2, 3, i], max_tokens=20, ignore_eos=True))
        wait_finished(batches, 8)
        per_request = {f"r{i}": sum(d.num_tokens for b in batches for d in b if d.request_id == f"r{i}")
                       for i in range(8)}
        assert per_request == {f"r{i}": 20 for i in range(8)}
        # 8 requests x 20 tokens arrived in far fewer than 160 sink calls: steps were batched
        assert len(batches) < 80
        assert max(len({d.request_id for d in b}) for b in batches) > 1
    finally:
        host.shutdown()


def test_abort_ends_the_request_with_reason_abort():
    host, batches = collect_host(step_seconds=0.01)
    try:
        host.submit(GenerationRequest("long", [5], max_tokens=1000, ignore_eos=True))
        time.sleep(0.1)
        host.abort("long")
        wait_finished(batches, 1)
        last = [d for b in batches for d in b if d.request_id == "long"][-1]
        assert last.finished and last.finish_reason == "abort"
        assert sum(d.num_tokens for b in batches for d in b) < 100
    finally:
        host.shutdown()


def test_engine_exception_becomes_an_error_delta():
    from inference.fake_backend import FAIL_MARKER

    host, batches = collect_host()
    try:
        host.submit(GenerationRequest("bad", FakeBackend().tokenizer.encode(FAIL_MARKER), max_tokens=30,
                                      ignore_eos=True))
        wait_finished(batches, 1)
        last = [d for b in batches for d in b if d.request_id == "bad"][-1]
        assert last.finished and "injected engine failure" in last.error
    finally:
        host.shutdown()


def test_a_request_the_engine_refuses_becomes_an_error_delta():
    class Refusing(FakeBackend):
        async def add(self, request, emit):
            raise ValueError("prompt too long for this engine")

    batches, lock = [], threading.Lock()
    host = EngineHost(Refusing(), lambda deltas: batches.append(list(deltas)))
    host.start()
    try:
        host.submit(GenerationRequest("refused", [1, 2], max_tokens=5))
        wait_finished(batches, 1)
        (delta,) = [d for b in batches for d in b]
        assert delta.finished and delta.error == "ValueError: prompt too long for this engine"
        assert host.num_active == 0
    finally:
        host.shutdown()
