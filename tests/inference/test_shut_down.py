"""vllm_backend.shut_down: an AsyncLLM is shut down once; its __del__ (which calls
shutdown again, at interpreter exit when vLLM's globals are gone) then does nothing."""
from inference.vllm_backend import shut_down


class Engine:
    """AsyncLLM's shape: __del__ calls self.shutdown()."""

    def __init__(self):
        self.calls = 0

    def shutdown(self, timeout=None):
        self.calls += 1

    def __del__(self):
        self.shutdown()


def test_the_engine_is_shut_down_once_and_its_del_does_nothing_more():
    engine = Engine()
    shut_down(engine)
    assert engine.calls == 1
    engine.__del__()  # what the collector calls
    engine.shutdown(timeout=1)
    assert engine.calls == 1
