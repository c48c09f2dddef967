"""API-key self-service and the usage figure, in process."""
from datetime import datetime, timezone

import pytest
from django.test import Client

from chatsite.runs.models import GenerationRun
from chatsite.runs.admission import run_submit
from chatsite.tenancy.models import ApiKey
from chatsite.tenancy.services import MAX_LIVE_KEYS_PER_USER, api_key_create
from tests.api.helpers import assert_error, key_client
from tests.factories import ChatFactory, queueing_pool

pytestmark = pytest.mark.django_db


def test_create_shows_the_secret_once_and_stores_only_a_hash(api_key):
    client = key_client(api_key)
    resp = client.post("/api/keys/", {"name": "  nightly   batch "}, content_type="application/json")
    assert resp.status_code == 201, resp.content
    created = resp.json()
    assert created["name"] == "nightly batch" and created["secret"].startswith(f"csk_{created['prefix']}_")
    row = ApiKey.objects.get(pk=created["id"])
    assert created["secret"].split("_", 2)[2] not in (row.secret_hash, row.prefix, row.name)
    listed = client.get("/api/keys/").json()
    assert {k["id"] for k in listed} == {created["id"], ApiKey.objects.get(name="test").pk}
    assert all("secret" not in k for k in listed)
    assert key_client(created["secret"]).get("/api/chats/").status_code == 200


def test_revoke_stops_the_key_at_once_and_keeps_it_listed(api_key, user, tenant):
    row, secret = api_key_create(user=user, tenant=tenant, name="doomed")
    client = key_client(api_key)
    resp = client.delete(f"/api/keys/{row.pk}/")
    assert resp.status_code == 200 and resp.json()["revoked_at"] is not None
    assert_error(key_client(secret).get("/api/chats/"), 401)
    assert client.delete(f"/api/keys/{row.pk}/").status_code == 200  # idempotent
    assert [k["revoked_at"] is not None for k in client.get("/api/keys/").json() if k["id"] == row.pk] == [True]


def test_last_used_is_recorded(api_key):
    key_client(api_key).get("/api/chats/")
    assert ApiKey.objects.get(name="test").last_used_at is not None


@pytest.mark.parametrize("body, field", [({}, "name"), ({"name": "  "}, "name"), ({"name": "x" * 101}, "name"),
                                         ({"name": 5}, "name"), ({"name": "a\u0000b"}, "name")])
def test_bad_key_name_is_400_and_creates_nothing(api_key, body, field):
    assert_error(key_client(api_key).post("/api/keys/", body, content_type="application/json"), 400, field=field)
    assert ApiKey.objects.count() == 1


def test_live_keys_are_capped(api_key, user, tenant):
    for i in range(MAX_LIVE_KEYS_PER_USER - 1):
        api_key_create(user=user, tenant=tenant, name=f"k{i}")
    assert_error(key_client(api_key).post("/api/keys/", {"name": "one more"}, content_type="application/json"),
                 409, "conflict")


def test_a_session_user_manages_keys_too(user, password):
    client = Client()
    client.login(username=user.username, password=password)
    resp = client.post("/api/keys/", {"name": "from the browser"}, content_type="application/json")
    assert resp.status_code == 201 and resp.json()["secret"]


def _finished_run(chat, prompt, completion, **kwargs):
    run = run_submit(chat=chat, content="hello", **kwargs)
    GenerationRun.objects.filter(pk=run.pk).update(status="completed", prompt_tokens=prompt,
                                                   completion_tokens=completion)
    return run


def test_usage_sums_this_months_runs_of_the_tenant_per_model(api_key, tenant, user, pool):
    small = queueing_pool("small")  # no worker runs here: admitted runs stay queued
    _finished_run(ChatFactory(tenant=tenant, owner=user, pool=pool), 10, 20)
    _finished_run(ChatFactory(tenant=tenant, owner=user, pool=pool), 1, 2)
    _finished_run(ChatFactory(tenant=tenant, owner=user, pool=small), 100, 200)
    old = _finished_run(ChatFactory(tenant=tenant, owner=user, pool=pool), 5000, 5000)
    GenerationRun.objects.filter(pk=old.pk).update(queued_at=datetime(2000, 1, 1, tzinfo=timezone.utc))
    _finished_run(ChatFactory(pool=pool), 7000, 7000)  # another tenant's
    usage = key_client(api_key).get("/api/usage/").json()
    assert usage["total_tokens"] == 333
    assert usage["models"] == [
        {"model": "flagship", "runs": 2, "prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33},
        {"model": "small", "runs": 1, "prompt_tokens": 100, "completion_tokens": 200, "total_tokens": 300},
    ]
    assert usage["period_start"].endswith("-01T00:00:00Z")


def test_bad_settings_are_refused_in_words_and_good_ones_reach_new_api_chats(user, pool):
    """The settings page's form (tests/web/test_settings_page.py drives it in a browser)."""
    from chatsite.tenancy.models import UserPreferences

    client = Client()
    client.force_login(user)
    resp = client.post("/settings/", {"theme": "purple", "default_instructions": "x"})
    assert resp.status_code == 400 and "Pick a theme: the system&#x27;s, light or dark." in resp.content.decode()
    resp = client.post("/settings/", {"theme": "dark", "default_instructions": "x" * 8001})
    assert resp.status_code == 400 and "at most 8,000 characters; these are 8,001" in resp.content.decode()
    assert not UserPreferences.objects.filter(user=user).exists()
    client.post("/settings/", {"theme": "dark", "default_instructions": " Be brief. "})
    api = client.post("/api/chats/", {"model": pool.name}, content_type="application/json").json()
    assert api["system_prompt"] == "Be brief."  # a new chat through the API starts with them too
