"""Fixtures of the worker tests that run more workers than the session's one per pool."""
import pytest

from tests import stack
from tests.factories import PoolFactory


@pytest.fixture(scope="module")
def start_flagship_worker(stack_env, fake_workers, django_db_blocker):
    """Starts another fake-engine worker of the flagship pool, by name, beside the session's
    fake-flagship (started and ready when it returns); each stops when the module ends."""
    procs = []

    def start(name: str) -> stack.Proc:
        with django_db_blocker.unblock():  # earlier transactional tests flushed the rows
            PoolFactory(name="flagship")
        proc = stack.start_worker({**stack_env, "CHATSITE_ENGINE": "fake", "CHATSITE_FAKE_STEP_SECONDS": "0.01"},
                                  pool="flagship", name=name)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.stop()
