"""Settings for the test suite: fast keep-alives and leases, and a Redis database
and Postgres test database of its own, so that concurrent test sessions on one
machine never share queues, streams or rows."""
import atexit
import os

import redis

os.environ.setdefault("CHATSITE_SSE_KEEPALIVE", "2")
os.environ.setdefault("CHATSITE_RUN_LEASE", "4")
# tests/api/test_sharing.py opens a link's cap of streams while one ~5 s reply runs: 100 did not
# fit in it on a loaded box.
os.environ.setdefault("CHATSITE_SHARE_MAX_STREAMS_PER_LINK", "10")
# The suite runs on the machine's shared Redis, which may persist nothing; the tests of the
# refusal itself (tests/deploy/test_run_stack.py) set it to 0 for the processes they start.
os.environ.setdefault("CHATSITE_ALLOW_VOLATILE_REDIS", "1")


def _claim_slot() -> int:
    """Claim a free Redis database number 1..15 for this test session (a key in db 0)."""
    base = os.environ.get("CHATSITE_TEST_REDIS_BASE", "redis://127.0.0.1:6379")
    client = redis.Redis.from_url(f"{base}/0")
    token = str(os.getpid())
    for slot in range(1, 16):
        if client.set(f"chatsite-test-slot:{slot}", token, nx=True, ex=6 * 3600):
            atexit.register(lambda s=slot: client.eval(
                "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) end", 1,
                f"chatsite-test-slot:{s}", token))
            return slot
    raise RuntimeError("no free Redis database for a test session (15 in use)")


# The pytest process claims a slot; its child processes inherit the choice. An xdist worker
# (`pytest -n 2`) inherits its controller's environment, so it claims a slot of its own: two
# workers' live stacks must not share Celery queues or run streams.
_SESSION = os.environ.get("PYTEST_XDIST_WORKER", "main")
if "REDIS_URL" not in os.environ or os.environ.get("CHATSITE_TEST_SLOT_OF", _SESSION) != _SESSION:
    _slot = _claim_slot()
    os.environ["CHATSITE_TEST_SLOT_OF"] = _SESSION
    os.environ["REDIS_URL"] = f"{os.environ.get('CHATSITE_TEST_REDIS_BASE', 'redis://127.0.0.1:6379')}/{_slot}"
    os.environ["CELERY_BROKER_URL"] = os.environ["REDIS_URL"]
    if _SESSION == "main":
        os.environ.setdefault("DATABASE_TEST_NAME", f"test_chatsite_{_slot}")
    else:
        os.environ["DATABASE_TEST_NAME"] = f"test_chatsite_{_slot}"

from chatsite.settings import *  # noqa: E402,F401,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
# The live servers of the tests serve static/ as it is now (whitenoise reads the finders on each
# request), so a test never runs against an older collectstatic; tests/web/test_static_files.py
# checks the product's storage (hashed, compressed, cached) on a collectstatic of its own.
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
WHITENOISE_USE_FINDERS = WHITENOISE_AUTOREFRESH = True
# Django's backend with a flush that deletes rows instead of truncating tables (tests/db_backend/).
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":  # noqa: F405
    DATABASES["default"]["ENGINE"] = "tests.db_backend"  # noqa: F405
