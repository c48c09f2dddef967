"""Share links on the live stack (daphne, fake-engine workers, Postgres, Redis): the owner
shares a chat, anyone with the link reads it without an account and follows a reply to its
end, a revoke ends a viewer mid-stream, and no one else can list or revoke a link."""
import re
import threading
import time

import httpx
import pytest
from django.conf import settings

from chatsite.chats.models import ChatShare
from chatsite.tenancy.services import api_key_create
from tests.factories import ChatFactory, TenantFactory, UserFactory
from tests.runs.helpers import post_message, wait_terminal
from tests.sse import parse, read_events, text_of
from tests.stack import LOG_DIR

pytestmark = pytest.mark.django_db(transaction=True)

LONG = {"max_tokens": 500, "ignore_eos": True}  # ~5 s at the fake engine's 100 tokens/s


def _share(live_url, auth, chat_id) -> dict:
    resp = httpx.post(f"{live_url}/api/chats/{chat_id}/shares/", headers=auth, json={}, timeout=10)
    assert resp.status_code == 201, resp.text
    return resp.json()


def _shared(live_url, token) -> httpx.Response:
    return httpx.get(f"{live_url}/api/shared/{token}", timeout=10)


def _live_message(data: dict) -> dict:
    return next(m for m in data["messages"] if m["run"] and m["run"]["events_url"])


def test_a_shared_chat_reads_without_an_account_and_follows_a_reply_to_its_end(live_url, fake_workers, auth, chat):
    first = post_message(live_url, auth, chat.pk, "First question", max_tokens=20)
    wait_terminal(first["id"])
    share = _share(live_url, auth, chat.pk)
    assert len(share["token"]) >= 32 and share["url"].endswith(f"/s/{share['token']}")
    assert not ChatShare.objects.filter(token_hash=share["token"]).exists()  # only its hash is kept

    run = post_message(live_url, auth, chat.pk, "Second question", **LONG)
    time.sleep(0.5)  # a late joiner: some of the reply is written already
    resp = _shared(live_url, share["token"])
    assert resp.status_code == 200 and resp.headers["x-robots-tag"].startswith("noindex")
    data = resp.json()
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "user", "assistant"]
    assert data["messages"][2]["content"] == "Second question"
    live = _live_message(data)
    assert live["run"]["id"] == run["id"] and live["live"]["have"] > 0

    # from the start of the stream: exactly the owner's text
    events = read_events(live_url + live["run"]["events_url"])
    assert events[-1].event == "done"
    saved = wait_terminal(run["id"])
    assert text_of(events) == saved.assistant_message.content
    # resumed after the text the read gave: the rest of it, nothing doubled
    rest = read_events(live_url + live["run"]["events_url"], last_event_id=live["live"]["last_event_id"])
    assert live["content"] + text_of(rest) == saved.assistant_message.content
    # and the owner's own stream says the same
    assert text_of(read_events(live_url + run["events_url"])) == saved.assistant_message.content

    after = _shared(live_url, share["token"]).json()
    assert after["messages"][-1]["content"] == saved.assistant_message.content
    assert after["messages"][-1]["run"]["events_url"] is None
    assert "owner" not in str(after) and chat.owner.username not in str(after)


def test_revoking_a_link_ends_a_viewer_mid_stream_and_the_link(live_url, fake_workers, auth, chat):
    share = _share(live_url, auth, chat.pk)
    run = post_message(live_url, auth, chat.pk, **LONG)
    url = live_url + _live_message(_shared(live_url, share["token"]).json())["run"]["events_url"]
    seen, ended = [], threading.Event()

    def view():
        with httpx.stream("GET", url, timeout=30) as resp:
            assert resp.status_code == 200
            for ev in parse(resp.iter_lines()):
                seen.append(ev)
        ended.set()

    viewer = threading.Thread(target=view, daemon=True)
    viewer.start()
    end = time.monotonic() + 10
    while not any(ev.event == "token" for ev in seen) and time.monotonic() < end:
        time.sleep(0.02)
    assert seen, "the viewer saw no token"
    resp = httpx.delete(f"{live_url}/api/chats/{chat.pk}/shares/{share['id']}/", headers=auth, timeout=10)
    assert resp.status_code == 200 and resp.json()["revoked_at"]
    assert ended.wait(10), "the viewer's stream did not end"
    assert seen[-1].event == "token"  # cut off before the reply's end, not finished
    assert wait_terminal(run["id"]).status == "completed"  # the owner's run goes on

    assert _shared(live_url, share["token"]).status_code == 404
    again = httpx.get(url, timeout=10)
    assert again.status_code == 401  # the token carried the link: revoked, and no account to fall back on
    listed = httpx.get(f"{live_url}/api/chats/{chat.pk}/shares/", headers=auth, timeout=10).json()
    assert [(s["id"], bool(s["revoked_at"])) for s in listed] == [(share["id"], True)]
    # idempotent: the first revocation time stands
    assert httpx.delete(f"{live_url}/api/chats/{chat.pk}/shares/{share['id']}/", headers=auth,
                        timeout=10).json()["revoked_at"] == resp.json()["revoked_at"]


def test_no_one_but_the_owner_lists_makes_or_revokes_links(live_url, auth, chat, pool):
    share = _share(live_url, auth, chat.pk)
    shares = f"{live_url}/api/chats/{chat.pk}/shares/"
    other_tenant = UserFactory(tenant=TenantFactory())
    same_tenant = UserFactory(tenant=chat.tenant)
    for user in (other_tenant, same_tenant):
        _, secret = api_key_create(user=user, tenant=user.memberships.get().tenant, name="other")
        other = {"Authorization": f"Bearer {secret}"}
        assert httpx.get(shares, headers=other, timeout=10).status_code == 404
        assert httpx.post(shares, headers=other, json={}, timeout=10).status_code == 404
        assert httpx.delete(f"{shares}{share['id']}/", headers=other, timeout=10).status_code == 404
    for method in ("GET", "POST", "DELETE"):
        url = shares if method != "DELETE" else f"{shares}{share['id']}/"
        assert httpx.request(method, url, timeout=10).status_code == 401  # anonymous
    # a link of another chat is not this chat's to revoke
    mine_too = ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=pool)
    assert httpx.delete(f"{live_url}/api/chats/{mine_too.pk}/shares/{share['id']}/", headers=auth,
                        timeout=10).status_code == 404
    assert _shared(live_url, share["token"]).status_code == 200  # still live after all that


@pytest.mark.parametrize("token", ["nope", "x" * 32, "x" * 500, "%00", "é"])
def test_a_bad_token_is_404_in_the_api_and_the_products_own_page(live_url, token, db):
    resp = _shared(live_url, token)
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found"
    page = httpx.get(f"{live_url}/s/{token}", timeout=10)
    assert page.status_code == 404
    assert "There is nothing here" in page.text and "Django" not in page.text
    assert page.headers["x-robots-tag"].startswith("noindex")


def test_deleting_the_chat_ends_its_links(live_url, auth, chat):
    share = _share(live_url, auth, chat.pk)
    assert httpx.delete(f"{live_url}/api/chats/{chat.pk}/", headers=auth, timeout=10).status_code == 204
    assert _shared(live_url, share["token"]).status_code == 404


def test_a_link_caps_its_live_viewers(live_url, fake_workers, auth, chat):
    cap = settings.CHATSITE["SHARE_MAX_STREAMS_PER_LINK"]  # the live web's: the same settings
    share = _share(live_url, auth, chat.pk)
    run = post_message(live_url, auth, chat.pk, **LONG)
    url = live_url + _live_message(_shared(live_url, share["token"]).json())["run"]["events_url"]
    with httpx.Client(timeout=30, limits=httpx.Limits(max_connections=cap + 5)) as client:
        streams = []
        try:
            for _ in range(cap):
                s = client.stream("GET", url)
                streams.append(s)
                assert s.__enter__().status_code == 200
            refused = client.get(url)
            assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_streams"
            assert refused.headers["retry-after"]
            # the owner's own streams are not the link's
            assert httpx.get(live_url + run["events_url"], timeout=30).status_code == 200
        finally:
            for s in streams:
                s.__exit__(None, None, None)
    wait_terminal(run["id"])


def test_a_links_token_never_reaches_the_access_log(web_url, auth, chat):
    token = _share(web_url, auth, chat.pk)["token"]
    assert _shared(web_url, token).status_code == 200
    assert httpx.get(f"{web_url}/s/{token}", timeout=10).status_code == 200
    log = (LOG_DIR / f"web-{web_url.rsplit(':', 1)[1]}.log").read_text()
    assert re.search(r'"GET /api/shared/\[redacted\]( HTTP/1.1)?" 200', log), log[-2000:]
    assert re.search(r'"GET /s/\[redacted\]( HTTP/1.1)?" 200', log)
    assert token not in log


def test_a_chat_has_at_most_twenty_live_links(live_url, auth, chat):
    made = [_share(live_url, auth, chat.pk) for _ in range(20)]
    refused = httpx.post(f"{live_url}/api/chats/{chat.pk}/shares/", headers=auth, json={}, timeout=10)
    assert refused.status_code == 400 and "at most 20" in refused.json()["error"]["message"]
    httpx.delete(f"{live_url}/api/chats/{chat.pk}/shares/{made[0]['id']}/", headers=auth, timeout=10)
    assert _share(live_url, auth, chat.pk)["id"] > made[-1]["id"]  # room again once one is revoked
    assert len({m["token"] for m in made}) == 20
