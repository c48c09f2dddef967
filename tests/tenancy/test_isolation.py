"""Tenant isolation over real HTTP (daphne): a key or signed-in user of tenant A gets
404 for every chat, message, run, event stream, key and model of tenant B, and
lists and usage figures that simply do not contain B's objects.

The cases are listed explicitly and crossed with the two ways to authenticate, so
the number of isolation cases is fixed: see ISOLATION_CASES at the bottom."""
from dataclasses import dataclass

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client

from chatsite import redis_keys
from chatsite.chats.models import Chat, Message
from chatsite.redis_client import get_redis
from chatsite.runs.stream import codec, log
from chatsite.runs.models import GenerationRun
from chatsite.pools.models import ModelPool
from chatsite.tenancy.models import ApiKey, Tenant
from chatsite.tenancy.services import api_key_create
from tests.factories import ChatFactory, PoolFactory, TenantFactory, UserFactory

# The rows are made once per way to authenticate (module scope) and every case
# checks that they did not change; flushing the database after each case would
# cost a second apiece. The mark makes pytest-django set up the test database
# (without it a session of only these tests would reach the development one).
pytestmark = pytest.mark.django_db


@dataclass
class World:
    a_chat: Chat
    b_chat: Chat
    b_run: GenerationRun
    b_key: ApiKey
    b_pool: str
    auth: dict  # how A authenticates (set per actor)


def _queued_run(chat: Chat, tokens: int) -> GenerationRun:
    user = Message.objects.create(chat=chat, role="user", content="B's secret question")
    reply = Message.objects.create(chat=chat, role="assistant", content="")
    run = GenerationRun.objects.create(tenant=chat.tenant, chat=chat, user_message=user, assistant_message=reply,
                                       pool=chat.pool, seed=1, max_tokens=50, prompt_tokens=tokens,
                                       completion_tokens=tokens)
    get_redis().xadd(redis_keys.run_stream(run.pk), codec.token_fields(seq=0, n=1, text="B's secret", attempt=1))
    return run


def _session_auth(user) -> dict:
    client = Client()
    client.force_login(user)
    csrf = _get_new_csrf_string()
    cookie = f"sessionid={client.cookies['sessionid'].value}; csrftoken={csrf}"
    return {"Cookie": cookie, "X-CSRFToken": csrf}


@pytest.fixture(scope="module", params=["api_key", "session"])
def world(request, live_url, django_db_blocker):
    with django_db_blocker.unblock():
        w = _make_world(request.param)
    yield w
    get_redis().delete(redis_keys.run_stream(w.b_run.pk))
    with django_db_blocker.unblock():
        users = [w.a_chat.owner_id, w.b_chat.owner_id]
        Tenant.objects.filter(chats__in=[w.a_chat, w.b_chat]).delete()
        get_user_model().objects.filter(pk__in=users).delete()
        ModelPool.objects.filter(name=w.b_pool).delete()


def _make_world(actor: str) -> World:
    shared, private = PoolFactory(name="flagship"), PoolFactory(name="b-private")
    tenant_a, tenant_b = TenantFactory(), TenantFactory()
    tenant_a.allowed_pools.set([shared])
    tenant_b.allowed_pools.set([shared, private])
    user_a, user_b = UserFactory(tenant=tenant_a), UserFactory(tenant=tenant_b)
    b_chat = ChatFactory(tenant=tenant_b, owner=user_b, pool=private, title="B's chat")
    b_run = _queued_run(b_chat, tokens=1000)
    b_key, _ = api_key_create(user=user_b, tenant=tenant_b, name="B's key")
    a_chat = ChatFactory(tenant=tenant_a, owner=user_a, pool=shared, title="A's chat")
    if actor == "api_key":
        auth = {"Authorization": f"Bearer {api_key_create(user=user_a, tenant=tenant_a, name='A')[1]}"}
    else:
        auth = _session_auth(user_a)
    return World(a_chat, b_chat, b_run, b_key, private.name, auth)


def _call(live_url, w: World, method: str, path: str, **kwargs) -> httpx.Response:
    return httpx.request(method, live_url + path.format(w=w), headers={**w.auth, **kwargs.pop("headers", {})},
                         timeout=10, **kwargs)


# (name, method, path, request kwargs): each must answer 404 and change nothing.
DETAIL_404 = [
    ("chat retrieve", "GET", "/api/chats/{w.b_chat.pk}/", {}),
    ("chat rename", "PATCH", "/api/chats/{w.b_chat.pk}/", {"json": {"title": "pwned"}}),
    ("chat switch model", "PATCH", "/api/chats/{w.b_chat.pk}/", {"json": {"model": "flagship"}}),
    ("chat delete", "DELETE", "/api/chats/{w.b_chat.pk}/", {}),
    ("messages list", "GET", "/api/chats/{w.b_chat.pk}/messages/", {}),
    ("messages list paged", "GET", "/api/chats/{w.b_chat.pk}/messages/?limit=1&offset=1", {}),
    ("message post", "POST", "/api/chats/{w.b_chat.pk}/messages/", {"json": {"content": "hi"}}),
    ("message post idempotent", "POST", "/api/chats/{w.b_chat.pk}/messages/",
     {"json": {"content": "hi"}, "headers": {"Idempotency-Key": "k-1"}}),
    ("run retrieve", "GET", "/api/runs/{w.b_run.pk}/", {}),
    ("run cancel", "POST", "/api/runs/{w.b_run.pk}/cancel", {}),
    ("run events (SSE)", "GET", "/api/runs/{w.b_run.pk}/events", {}),
    ("run events (SSE) with Last-Event-ID", "GET", "/api/runs/{w.b_run.pk}/events",
     {"headers": {"Last-Event-ID": "0-0"}}),
    ("run events (SSE), no slash variant", "GET", "/api/runs/{w.b_run.pk}/events/", {}),
    ("key revoke", "DELETE", "/api/keys/{w.b_key.pk}/", {}),
]
OPENAI_404 = [  # bearer keys only: /v1/ has no session auth
    ("openai model retrieve", "GET", "/v1/models/{w.b_pool}", {}),
    ("openai completion on B's model", "POST", "/v1/chat/completions",
     {"json": {"model": "b-private", "messages": [{"role": "user", "content": "hi"}]}}),
]


def _assert_b_untouched(w: World) -> None:
    b_chat = Chat.objects.get(pk=w.b_chat.pk)
    assert (b_chat.title, b_chat.pool.name) == ("B's chat", "b-private")
    assert Message.objects.filter(chat=b_chat).count() == 2
    assert GenerationRun.objects.get(pk=w.b_run.pk).status == "queued"
    assert not log.cancel_asked(w.b_run.pk)
    assert ApiKey.objects.get(pk=w.b_key.pk).revoked_at is None
    assert not GenerationRun.objects.filter(chat=w.a_chat).exists()
    assert set(Chat.objects.filter(tenant__in=[w.a_chat.tenant, b_chat.tenant])) == {w.a_chat, b_chat}


def _check_404(live_url, w: World, method: str, path: str, kwargs: dict) -> None:
    resp = _call(live_url, w, method, path, **kwargs)
    assert resp.status_code == 404, (resp.status_code, resp.text[:300])
    assert "secret" not in resp.text and "B's" not in resp.text
    assert resp.json()["error"]["message"]
    _assert_b_untouched(w)


@pytest.mark.parametrize("name, method, path, kwargs", DETAIL_404, ids=[c[0] for c in DETAIL_404])
def test_other_tenants_object_is_404(live_url, world, name, method, path, kwargs):
    _check_404(live_url, world, method, path, kwargs)


@pytest.mark.parametrize("world", ["api_key"], indirect=True)  # /v1/ takes API keys only
@pytest.mark.parametrize("name, method, path, kwargs", OPENAI_404, ids=[c[0] for c in OPENAI_404])
def test_other_tenants_model_is_404_on_the_openai_api(live_url, world, name, method, path, kwargs):
    _check_404(live_url, world, method, path, kwargs)


def _ids(resp: httpx.Response, key: str = "results") -> set:
    assert resp.status_code == 200, resp.text[:300]
    body = resp.json()
    items = body[key] if isinstance(body, dict) else body
    return {item["id"] for item in items}


LISTS = [
    ("chats list", lambda u, w: _ids(_call(u, w, "GET", "/api/chats/")) == {w.a_chat.pk}),
    ("chats list, all pages", lambda u, w: w.b_chat.pk not in _ids(_call(u, w, "GET", "/api/chats/?limit=200"))),
    ("keys list", lambda u, w: w.b_key.pk not in _ids(_call(u, w, "GET", "/api/keys/"), key=None)),
    ("models list", lambda u, w: _ids(_call(u, w, "GET", "/api/models/"), key=None) == {"flagship"}),
    ("usage", lambda u, w: _call(u, w, "GET", "/api/usage/").json()["total_tokens"] == 0
     and _call(u, w, "GET", "/api/usage/").json()["models"] == []),
]
OPENAI_LISTS = [
    ("openai models list", lambda u, w: _ids(_call(u, w, "GET", "/v1/models"), key="data") == {"flagship"}),
]


@pytest.mark.parametrize("name, check", LISTS, ids=[c[0] for c in LISTS])
def test_lists_and_figures_hold_none_of_the_other_tenants_objects(live_url, world, name, check):
    assert check(live_url, world)
    _assert_b_untouched(world)


@pytest.mark.parametrize("world", ["api_key"], indirect=True)
@pytest.mark.parametrize("name, check", OPENAI_LISTS, ids=[c[0] for c in OPENAI_LISTS])
def test_openai_lists_hold_none_of_the_other_tenants_models(live_url, world, name, check):
    assert check(live_url, world)
    _assert_b_untouched(world)


# 14 detail cases + 5 list/figure cases, for each of 2 ways to authenticate (API key, session),
# plus 2 + 1 OpenAI cases for API keys only.
ISOLATION_CASES = (len(DETAIL_404) + len(LISTS)) * 2 + len(OPENAI_404) + len(OPENAI_LISTS)
assert ISOLATION_CASES == 41
