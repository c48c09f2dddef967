"""Fixtures: real Postgres and Redis; live daphne and Celery workers on demand."""
import pytest
from django.conf import settings
from django.db import connection

from tests import stack
from tests.factories import PASSWORD, ChatFactory, PoolFactory, TenantFactory, UserFactory


@pytest.fixture(scope="session", autouse=True)
def _clean_redis():
    from chatsite.redis_client import get_redis

    get_redis().flushdb()  # the test Redis database only (settings_test)
    yield


@pytest.fixture(scope="session")
def stack_env(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        db = dict(connection.settings_dict)
    return stack.process_env(db, settings.REDIS_URL)


@pytest.fixture(scope="session")
def live_url(stack_env):
    """A daphne serving the platform against the test database."""
    proc, url = stack.start_web(stack_env)
    yield url
    proc.stop()


def _ensure_pools(django_db_blocker, names):
    with django_db_blocker.unblock():
        for name in names:
            PoolFactory(name=name)


@pytest.fixture(scope="session")
def fake_workers(stack_env, django_db_blocker):
    """One fake-engine worker per pool (flagship, small), for fast platform tests."""
    _ensure_pools(django_db_blocker, ["flagship", "small"])
    procs = [stack.start_worker({**stack_env, "CHATSITE_ENGINE": "fake", "CHATSITE_FAKE_STEP_SECONDS": "0.01"},
                                pool=pool, name=f"fake-{pool}") for pool in ("flagship", "small")]
    yield procs
    for proc in procs:
        proc.stop()


@pytest.fixture
def tenant(db):
    return TenantFactory()


@pytest.fixture
def user(tenant):
    return UserFactory(tenant=tenant)


@pytest.fixture
def pool(db):
    return PoolFactory(name="flagship")


@pytest.fixture
def chat(tenant, user, pool):
    return ChatFactory(tenant=tenant, owner=user, pool=pool)


@pytest.fixture
def api_key(user, tenant):
    from chatsite.tenancy.services import api_key_create

    _, secret = api_key_create(user=user, tenant=tenant, name="test")
    return secret


@pytest.fixture
def auth(api_key):
    return {"Authorization": f"Bearer {api_key}"}


@pytest.fixture
def password():
    return PASSWORD
