"""The token in a run's events_url: it lets its holder follow that run, and only that
run, for EVENTS_TOKEN_SECONDS, without the database; anything else falls back to the
session or API key. (Its binding to tenant, user and credential, and its revocation:
tests/security/test_tokens.py and tests/tenancy/test_revocation.py.)"""
import time

import httpx
import pytest
from django.core import signing

from chatsite.runs.access import events_token, token_grants
from tests.runs.helpers import post_message, wait_terminal
from tests.security.helpers import open_run
from tests.sse import read_events, text_of


def _expired_token(run) -> str:
    real_time = time.time
    try:
        time.time = lambda: real_time() - 3600  # issued an hour ago
        return events_token(run)
    finally:
        time.time = real_time


@pytest.mark.django_db
def test_a_token_grants_its_own_run_only(settings, chat):
    settings.CHATSITE = {**settings.CHATSITE, "EVENTS_TOKEN_SECONDS": 900}
    run, other = open_run(chat), open_run(chat)
    token = events_token(run)
    assert token_grants(token, run.pk) and token_grants(token, str(run.pk))
    assert not token_grants(token, other.pk)
    assert not token_grants(token[:-2] + ("AA" if not token.endswith("AA") else "BB"), run.pk)  # tampered
    payload = signing.Signer(salt="chatsite.runs.events.v2").unsign_object(token)
    forged = signing.Signer(key="not-this-install", salt="chatsite.runs.events.v2").sign_object(payload)
    assert not token_grants(forged, run.pk)  # signed with another key
    assert not token_grants(_expired_token(run), run.pk)
    assert not token_grants("", run.pk)


live = pytest.mark.django_db(transaction=True)


@live
def test_events_url_streams_without_credentials(live_url, fake_workers, chat, auth):
    run = post_message(live_url, auth, chat.pk, max_tokens=20)
    evs = read_events(live_url + run["events_url"])  # no Authorization header, no cookie
    assert evs[-1].event == "done"
    assert text_of(evs) == wait_terminal(run["id"]).assistant_message.content != ""


@live
def test_a_token_opens_no_other_run_and_expires(live_url, fake_workers, chat, auth):
    first = post_message(live_url, auth, chat.pk, max_tokens=5)
    wait_terminal(first["id"])
    second = post_message(live_url, auth, chat.pk, max_tokens=5)
    token = first["events_url"].partition("?token=")[2]
    other = httpx.get(f"{live_url}/api/runs/{second['id']}/events?token={token}", timeout=30)
    assert other.status_code == 401 and other.json()["error"]["code"] == "not_authenticated"
    from chatsite.runs.models import GenerationRun

    expired_url = (f"{live_url}/api/runs/{first['id']}/events"
                   f"?token={_expired_token(GenerationRun.objects.get(pk=first['id']))}")
    assert httpx.get(expired_url, timeout=30).status_code == 401
    # an expired token is no worse than none: the API key still opens the stream
    evs = read_events(expired_url, headers=auth)
    assert evs[-1].event == "done"
