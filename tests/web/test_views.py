"""The server-rendered pages through Django's test client (no browser, no workers)."""
import json
import re

import pytest
from django.urls import reverse

from chatsite import redis_keys
from chatsite.chats.models import Chat, Message
from chatsite.redis_client import get_redis
from chatsite.runs.stream import codec
from chatsite.runs.access import token_grants
from chatsite.runs.models import GenerationRun
from tests.runs.helpers import end_stream
from tests.factories import ChatFactory, PoolFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def _page_data(resp) -> dict:
    return json.loads(re.search(r'<script id="page-data" type="application/json">(.*?)</script>',
                                resp.content.decode(), re.S).group(1))


def _running_run(chat) -> GenerationRun:
    asked = Message.objects.create(chat=chat, role="user", content="Go on")
    reply = Message.objects.create(chat=chat, role="assistant", content="", parent=asked, depth=1)
    chat.current_leaf = reply
    chat.save(update_fields=["current_leaf"])
    return GenerationRun.objects.create(tenant=chat.tenant, chat=chat, user_message=asked, assistant_message=reply,
                                        pool=chat.pool, status="running", seed=1, max_tokens=50)


def test_pages_need_sign_in(client):
    for url in ("/", "/c/1/"):
        resp = client.get(url)
        assert resp.status_code == 302 and resp["Location"].startswith("/login/?next=")


def test_sign_out_is_a_post_only(signed_in):
    assert signed_in.get("/logout/").status_code == 405
    assert signed_in.post("/logout/").status_code == 302


def test_a_running_reply_is_in_the_html_with_where_to_resume(signed_in, chat):
    run = _running_run(chat)
    r = get_redis()
    key = redis_keys.run_stream(run.pk)
    ids = [r.xadd(key, codec.token_fields(seq=seq, n=1, text=text, attempt=1))
           for seq, text in enumerate(["Hello", " <b>world", "</b>"])]
    end_stream(run.pk, codec.done_fields(finish_reason="stop", prompt_tokens=3, completion_tokens=3))
    try:
        resp = signed_in.get(f"/c/{chat.pk}/")
    finally:
        r.delete(key)
    assert resp.status_code == 200
    html = resp.content.decode()
    assert "Hello &lt;b&gt;world&lt;/b&gt;</div>" in html  # escaped, in the first paint
    reply = _page_data(resp)["messages"][1]
    assert reply["content"] == "Hello <b>world</b>"
    # resume after the last token, so the browser still receives the terminal entry
    assert reply["live"] == {"text": "Hello <b>world</b>", "have": 3, "last_event_id": ids[-1]}
    path, _, token = reply["run"]["events_url"].partition("?token=")
    assert path == f"/api/runs/{run.pk}/events" and token_grants(token, run.pk)


def test_the_page_uses_no_asset_from_another_origin(signed_in, chat):
    html = signed_in.get(f"/c/{chat.pk}/").content.decode()
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert signed_in.get("/static/js/markdown.js").status_code == 200


def test_rename_and_delete_work_without_javascript(signed_in, chat):
    resp = signed_in.post(reverse("chat-rename", args=[chat.pk]), {"title": "  Spaced   out  "})
    assert resp.status_code == 302
    chat.refresh_from_db()
    assert chat.title == "Spaced out"

    run = _running_run(chat)
    resp = signed_in.post(reverse("chat-delete", args=[chat.pk]), follow=True)
    assert Chat.objects.filter(pk=chat.pk).exists()
    assert "stop it first" in resp.content.decode()

    run.status = "completed"
    run.save()
    resp = signed_in.post(reverse("chat-delete", args=[chat.pk]))
    assert resp.status_code == 302 and resp["Location"] == "/"
    assert not Chat.objects.filter(pk=chat.pk).exists()


def test_another_users_chat_is_not_found(signed_in, tenant, pool):
    theirs = ChatFactory(tenant=tenant, owner=UserFactory(tenant=tenant), pool=pool)
    elsewhere = ChatFactory(tenant=TenantFactory(), pool=pool)
    for chat in (theirs, elsewhere):
        assert signed_in.get(f"/c/{chat.pk}/").status_code == 404
        assert signed_in.post(reverse("chat-rename", args=[chat.pk]), {"title": "x"}).status_code == 404
        assert signed_in.post(reverse("chat-delete", args=[chat.pk])).status_code == 404
    assert Chat.objects.filter(pk__in=[theirs.pk, elsewhere.pk]).count() == 2


def test_a_user_in_no_team_is_told_so(client):
    client.force_login(UserFactory())
    resp = client.get("/")
    assert resp.status_code == 403
    assert "not in a team" in resp.content.decode()


def test_new_chat_picks_the_first_model_that_is_up(signed_in, tenant):
    from chatsite.pools.models import ModelPool

    ModelPool.objects.update(enabled=False)  # pools the live-stack tests left (rolled back after this test)
    for name in ("alpha", "beta"):
        PoolFactory(name=name, display_name=name.title())
    data = _page_data(signed_in.get("/"))
    assert data["chat"] is None and data["messages"] == []
    assert [m["id"] for m in data["models"]] == ["alpha", "beta"]
    assert not any(m["up"] for m in data["models"])  # no worker is running in this test


def test_pages_forbid_inline_and_foreign_scripts(signed_in, client, chat):
    for resp in (signed_in.get("/"), signed_in.get(f"/c/{chat.pk}/")):
        policy = resp["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    client.logout()
    assert "script-src 'self'" in client.get("/login/")["Content-Security-Policy"]


def test_chats_the_openai_api_made_stay_in_the_admin(client, tenant, user, pool):
    from django.contrib.auth import get_user_model

    from chatsite.runs.admission import Ask, Caller, NewChat, Send, run_admit

    admitted = run_admit(Ask(caller=Caller(tenant, user), source=GenerationRun.Source.OPENAI, turn=Send("From a script"),
                             where=NewChat(model="flagship", listed=False,
                                           history=({"role": "system", "content": "Be brief."},))))
    chat, run = admitted.chat, admitted.run
    assert not chat.listed and run.prompt_snapshot == [{"role": "system", "content": "Be brief."},
                                                      {"role": "user", "content": "From a script"}]
    client.force_login(user)
    assert f'data-chat-link="{chat.pk}"' not in client.get("/").content.decode()  # not in the sidebar
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw-123456789"))
    assert "From a script" in client.get(f"/admin/chats/chat/{chat.pk}/change/").content.decode()
    assert client.get(f"/admin/runs/generationrun/{run.pk}/change/").status_code == 200
