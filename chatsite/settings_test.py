"""Settings for the test suite: its own Redis database, fast keep-alives and leases."""
import os

os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/1")
os.environ.setdefault("CHATSITE_SSE_KEEPALIVE", "2")
os.environ.setdefault("CHATSITE_RUN_LEASE", "4")

from chatsite.settings import *  # noqa: E402,F401,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
