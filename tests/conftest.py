"""Fixtures: real Postgres and Redis; live daphne and Celery workers on demand."""
import os

import pytest
from django.conf import settings
from django.db import connection

from tests import marks, stack
from tests.factories import PASSWORD, ChatFactory, PoolFactory, TenantFactory, UserFactory, queueing_pool


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads xdist_group marks (tests/marks.py)
def pytest_collection_modifyitems(items):
    marks.add_needs(items)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, migrated once; then a transactional test's flush keeps the
    content types and permissions (tests/db_backend/), so their refill after each flush is
    turned off. A test that changed those rows would leak them: the session fails if one did."""
    from django.contrib.auth.management import create_permissions
    from django.contrib.contenttypes.management import create_contenttypes
    from django.db.models.signals import post_migrate

    from tests.db_backend.base import kept_models

    def kept_rows():
        with django_db_blocker.unblock():
            return [list(model.objects.order_by("pk").values_list()) for model in kept_models()]

    before = kept_rows()
    receivers = [(create_permissions, {"dispatch_uid": "django.contrib.auth.management.create_permissions"}),
                 (create_contenttypes, {})]
    for receiver, how in receivers:
        post_migrate.disconnect(receiver, **how)
    yield
    for receiver, how in receivers:
        post_migrate.connect(receiver, **how)
    assert kept_rows() == before, "a test changed content types or permissions, which flushes keep (tests/db_backend/)"


@pytest.fixture(scope="session", autouse=True)
def _clean_redis():
    from chatsite.redis_client import get_redis

    get_redis().flushdb()  # the test Redis database only (settings_test)
    yield


@pytest.fixture(scope="session", autouse=True)
def _fresh_logs():
    """This session's log folder (its own Redis database's) starts empty: its processes append."""
    for old in stack.LOG_DIR.glob("*.log"):
        old.unlink()


@pytest.fixture(autouse=True)
def _no_shedding_memo():
    """Admission reads a pool's finished runs, its workers' slots (chatsite.runs.services.shedding)
    and whether it has a live worker (availability) at most once a second per process: a test
    starts without another's."""
    from chatsite.runs.services import availability, shedding

    shedding.forget_memos()
    availability.forget_memos()


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


@pytest.fixture(scope="session")
def uvicorn_url(stack_env):
    """The same web under uvicorn (CHATSITE_WEB_SERVER=uvicorn, an operator's choice)."""
    proc, url = stack.start_web(stack_env, server="uvicorn")
    yield url
    proc.stop()


@pytest.fixture(params=["daphne", "uvicorn"])
def web_url(request):
    """The web under each server the launcher offers (chatsite/edge/web_server.py)."""
    return request.getfixturevalue("live_url" if request.param == "daphne" else "uvicorn_url")


def _ensure_pools(django_db_blocker, names):
    with django_db_blocker.unblock():
        for name in names:
            PoolFactory(name=name)


@pytest.fixture(scope="session")
def fake_workers(stack_env, django_db_blocker):
    """One fake-engine worker per pool (flagship, small), for fast platform tests."""
    _ensure_pools(django_db_blocker, ["flagship", "small"])
    procs = [stack.launch_worker({**stack_env, "CHATSITE_ENGINE": "fake", "CHATSITE_FAKE_STEP_SECONDS": "0.01"},
                                 pool=pool, name=f"fake-{pool}") for pool in ("flagship", "small")]
    stack.started_together(procs, [stack.wait_for_worker] * len(procs))  # both boot at once
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
    """The flagship pool, marked to queue while no worker is live: tests that admit runs
    in-process have no worker (the live stack's `fake_workers` are real ones, beating)."""
    return queueing_pool("flagship")


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


VLLM_POOL = "vllm-flagship"  # a pool name no fake worker consumes


def _real_model_dir():
    from inference.real_model import build_real_model

    return build_real_model(settings.CHATSITE["DEMO_MODELS_DIR"])  # no-op when cached (setup builds it)


def _vllm_pool_row():
    """The demo flagship exactly as seeded: SmolLM2-135M-Instruct in float32, 8,192 positions, with the
    shipped chat template that adds tools to the model's own."""
    from inference.chat_templates import SMOLLM2_TOOLS
    from inference.engine_config import DEMO_CONTEXT_LENGTH, DEMO_POOL_ENGINE_ARGS

    return PoolFactory(name=VLLM_POOL, model=str(_real_model_dir()), engine_args=DEMO_POOL_ENGINE_ARGS["flagship"],
                       chat_template=SMOLLM2_TOOLS,
                       context_length=DEMO_CONTEXT_LENGTH, max_output_tokens=1024,
                       default_sampling={"temperature": 0.7, "top_p": 0.95, "max_tokens": 64})


@pytest.fixture(scope="session")
def _vllm_worker_launched(stack_env, django_db_blocker):
    """The session's vLLM worker process, started and past reading its pool row; its engine
    may still be loading."""
    with django_db_blocker.unblock():
        _vllm_pool_row()
    # Beats every 0.2 s so a test sees the engine's figures while a short run is still going.
    env = {**stack_env, "VLLM_CPU_KVCACHE_SPACE": "1", "CHATSITE_WORKER_SLOTS": "16", "CHATSITE_HEARTBEAT_SECONDS": "0.2"}
    proc = stack.launch_worker(env, pool=VLLM_POOL, name="vllm")
    # The worker reads its pool row once, before it loads the engine. Past that line the row
    # goes again, so that the tests before the first vLLM test see the pools they saw when
    # the worker started with it (vllm_worker and vllm_pool make it again).
    proc.wait_for_log("starting the engine", timeout=120)
    from chatsite.pools.models import ModelPool

    with django_db_blocker.unblock():
        ModelPool.objects.filter(name=VLLM_POOL).delete()
    yield proc
    proc.stop(timeout=60)


_FIRST_TEST_SEEN = pytest.StashKey[bool]()


@pytest.fixture(autouse=True)
def _vllm_engine_loads_early(request):
    """When this process will run vLLM tests, their worker starts at its first test: the engine's
    ~30-60 s start then overlaps the tests run before the first that uses it. Under xdist's loadgroup
    (`make test`) every vLLM test is in one group (tests/marks.py), handed out first as the largest unit:
    only the worker whose first test is in it starts an engine (each worker collects every test)."""
    if request.config.stash.get(_FIRST_TEST_SEEN, False):
        return
    request.config.stash[_FIRST_TEST_SEEN] = True
    runs_vllm_tests = "PYTEST_XDIST_WORKER" not in os.environ or request.node.get_closest_marker("vllm")
    if runs_vllm_tests and any("vllm_worker" in item.fixturenames for item in request.session.items):
        request.getfixturevalue("_vllm_worker_launched")


@pytest.fixture(scope="session")
def vllm_worker(_vllm_worker_launched, django_db_blocker):
    """A real Celery worker holding a real vLLM engine on the real flagship model,
    SmolLM2-135M-Instruct (pool VLLM_POOL). Engine start takes ~40-60 s, once per session."""
    with django_db_blocker.unblock():
        _vllm_pool_row()
    return stack.wait_for_worker(_vllm_worker_launched, timeout=300)


@pytest.fixture
def vllm_pool(db, vllm_worker):
    """The VLLM_POOL row for this test (transactional tests flush rows between tests)."""
    return _vllm_pool_row()
