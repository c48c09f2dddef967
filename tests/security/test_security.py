"""Security users take for granted: CSRF, login throttling, staff-only admin,
secrets kept out of logs, and production settings that pass `check --deploy`."""
import logging
import secrets
import subprocess
import sys

import pytest
from django.test import Client

from chatsite.logging_filters import RedactSecrets
from chatsite.redis_client import get_redis
from tests.factories import PASSWORD, UserFactory
from tests.stack import ROOT

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _forget_failures():
    for pattern in ("login-lock:*", "login-known:*"):
        for key in get_redis().scan_iter(pattern):
            get_redis().delete(key)


def test_production_settings_pass_check_deploy():
    env = {"DJANGO_SETTINGS_MODULE": "chatsite.settings_production", "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
           "DJANGO_ALLOWED_HOSTS": "chat.example.com", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no issues" in out.stdout


def test_production_settings_refuse_to_start_without_a_real_secret():
    env = {"DJANGO_SETTINGS_MODULE": "chatsite.settings_production", "DJANGO_SECRET_KEY": "short",
           "DJANGO_ALLOWED_HOSTS": "x", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0 and "DJANGO_SECRET_KEY" in out.stderr


def test_login_is_throttled_after_repeated_failures(tenant):
    user = UserFactory(tenant=tenant)
    client = Client()
    for _ in range(5):
        resp = client.post("/login/", {"username": user.username, "password": "wrong"})
        assert resp.status_code == 200 and "_auth_user_id" not in client.session
    resp = client.post("/login/", {"username": user.username, "password": PASSWORD})  # right, but locked out
    assert "_auth_user_id" not in client.session
    other, elsewhere = UserFactory(tenant=tenant), Client(REMOTE_ADDR="10.9.9.9")
    elsewhere.post("/login/", {"username": other.username, "password": PASSWORD})
    assert elsewhere.session.get("_auth_user_id") == str(other.pk)  # only that account and address are locked


def test_login_works_before_the_limit(tenant):
    user = UserFactory(tenant=tenant)
    client = Client()
    client.post("/login/", {"username": user.username, "password": "wrong"})
    client.post("/login/", {"username": user.username, "password": PASSWORD})
    assert client.session.get("_auth_user_id") == str(user.pk)


def test_admin_is_for_staff_only(tenant):
    user = UserFactory(tenant=tenant)
    client = Client()
    client.force_login(user)
    resp = client.get("/admin/")
    assert resp.status_code == 302 and "/admin/login/" in resp["Location"]
    user.is_staff = user.is_superuser = True
    user.save()
    assert client.get("/admin/").status_code == 200


def test_csrf_is_enforced_on_forms_and_session_api_writes(tenant, pool):
    user = UserFactory(tenant=tenant)
    client = Client(enforce_csrf_checks=True)
    assert client.post("/login/", {"username": user.username, "password": PASSWORD}).status_code == 403
    client.force_login(user)
    resp = client.post("/api/chats/", {"model": pool.name}, content_type="application/json")
    assert resp.status_code == 403


def test_secrets_never_reach_the_logs(caplog):
    logger = logging.getLogger("chatsite.test")
    logger.addFilter(RedactSecrets())
    key = "csk_0123456789ab_" + "s" * 43
    logger.warning("auth failed for header Authorization: Bearer %s cookie sessionid=abc123; csrftoken=zzz", key)
    text = caplog.text
    assert key not in text and "abc123" not in text and "zzz" not in text and "[redacted]" in text
