"""Fixtures of the worker tests that run more workers than the session's one per pool."""
import pytest

from tests import stack
from tests.factories import PoolFactory


@pytest.fixture(scope="module")
def start_pool_worker(stack_env, django_db_blocker):
    """Starts a fake-engine worker of `pool` by name (the pool made with `pool_fields` if it is
    not there: earlier transactional tests flushed the rows), a step every `step_seconds`,
    `env` over the stack's; started and ready when it returns; each stops when the module ends."""
    procs = []

    def start(name: str, *, pool: str, step_seconds: float = 0.01, pool_fields: dict | None = None,
              **env) -> stack.Proc:
        with django_db_blocker.unblock():
            PoolFactory(name=pool, **(pool_fields or {}))
        env = {**stack_env, "CHATSITE_ENGINE": "fake", "CHATSITE_FAKE_STEP_SECONDS": str(step_seconds),
               **{k: str(v) for k, v in env.items()}}
        proc = stack.start_worker(env, pool=pool, name=name)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.stop()


@pytest.fixture(scope="module")
def start_flagship_worker(start_pool_worker, fake_workers):
    """Starts another fake-engine worker of the flagship pool, by name, beside the session's fake-flagship."""
    return lambda name: start_pool_worker(name, pool="flagship")
