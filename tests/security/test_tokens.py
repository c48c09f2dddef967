"""The events token: signed with this install's own secret (so reading the source
forges nothing), bound to the run and to the tenant, user and credential it was
given to, and never written to the access log."""
import re

import httpx
import pytest
from django.conf import settings
from django.core import signing
from django.test import Client

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs.stream import codec
from chatsite.runs.access import events_token, token_grants
from chatsite.tenancy.models import ApiKey
from chatsite.tenancy.revocation import session_fingerprint
from tests.security.helpers import open_run
from tests.sse import read_events
from tests.stack import LOG_DIR

pytestmark = pytest.mark.django_db(transaction=True)

SALT = "chatsite.runs.events.v2"
OLD_DEFAULT_KEY = "dev-only-insecure-key-change-me"  # what chatsite/settings.py used to fall back to


def _payload(token: str) -> dict:
    return signing.Signer(salt=SALT).unsign_object(token)


def test_this_install_signs_with_its_own_secret():
    assert settings.SECRET_KEY != OLD_DEFAULT_KEY and len(settings.SECRET_KEY) >= 50


def test_a_token_forged_from_the_source_opens_nothing(live_url, chat):
    run = open_run(chat, text="B's secret")
    for key in (OLD_DEFAULT_KEY, "django-insecure-whatever"):
        forged = signing.Signer(key=key, salt=SALT).sign_object(
            {"r": run.pk, "c": chat.pk, "t": chat.tenant_id, "u": chat.owner_id, "k": "", "i": 4102444800})
        resp = httpx.get(f"{live_url}/api/runs/{run.pk}/events?token={forged}", timeout=10)
        assert resp.status_code == 401 and "secret" not in resp.text


def test_a_token_names_its_run_tenant_user_and_credential(live_url, chat, auth):
    run = open_run(chat)
    body = httpx.get(f"{live_url}/api/runs/{run.pk}/", headers=auth, timeout=10).json()
    through_key = _payload(body["events_url"].partition("?token=")[2])
    key = ApiKey.objects.get(user=chat.owner)
    assert (through_key["r"], through_key["c"], through_key["t"], through_key["u"], through_key["k"]) == \
        (run.pk, chat.pk, chat.tenant_id, chat.owner_id, f"key:{key.pk}")
    browser = Client()
    browser.force_login(chat.owner)
    page_url = browser.get(f"/api/runs/{run.pk}/").json()["events_url"]
    through_session = _payload(page_url.partition("?token=")[2])
    assert through_session["k"] == f"session:{session_fingerprint(browser.session.session_key)}"
    assert browser.session.session_key not in page_url  # the session is named, never revealed
    grant = token_grants(page_url.partition("?token=")[2], run.pk)
    assert (grant.tenant_id, grant.user_id) == (chat.tenant_id, chat.owner_id)


def test_outside_a_request_a_token_is_bound_to_the_chats_owner(chat):
    run = open_run(chat)
    grant = token_grants(events_token(run), run.pk)
    assert (grant.user_id, grant.credential) == (chat.owner_id, "")


def test_the_token_never_reaches_the_access_log(web_url, chat, auth):
    run = open_run(chat)
    get_redis().xadd(redis_keys.run_stream(run.pk), codec.done_fields(finish_reason="stop", prompt_tokens=1,
                                                                      completion_tokens=1))
    events_url = httpx.get(f"{web_url}/api/runs/{run.pk}/", headers=auth, timeout=10).json()["events_url"]
    token = events_url.partition("?token=")[2]
    assert read_events(f"{web_url}{events_url}")[-1].event == "done"  # a whole response: the server logs it
    bogus = "not-a-real-token-" + "x" * 20
    assert httpx.get(f"{web_url}/api/runs/{run.pk}/events?token={bogus}&last_event_id=zz",
                     timeout=10).status_code == 401
    log = (LOG_DIR / f"web-{web_url.rsplit(':', 1)[1]}.log").read_text()
    version = "( HTTP/1.1)?"  # uvicorn's line names it, daphne's does not
    assert re.search(rf'"GET /api/runs/{run.pk}/events\?token=\[redacted\]&last_event_id=zz{version}" 401', log), \
        log[-2000:]  # the line is there, redacted
    assert re.search(rf'"GET /api/runs/{run.pk}/events\?token=\[redacted\]{version}" 200', log)
    assert token not in log and bogus not in log
