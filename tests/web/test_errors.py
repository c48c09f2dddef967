"""Every way a send or a reply can fail is told in words, with a way to retry."""
import json
import re

import pytest

from chatsite.chats.models import Message
from chatsite.pools.models import ModelPool
from inference.fake_backend import FAIL_MARKER
from tests.factories import ChatFactory
from tests.web.pages import LONG_REPLY, ChatPage, expect, saved_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# A message POST, or a new chat's start (the chat and its first message in one POST).
MESSAGES_URL = re.compile(r".*/api/chats/(\d+/messages/)?$")


def _fail_first_post(page, status: int, body: dict, retry_after: int | None):
    """Answer the first message POST with an error, as the server would; let the rest through."""
    calls = {"n": 0}

    def handle(route):
        if route.request.method == "POST" and calls["n"] == 0:
            calls["n"] += 1
            headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
            return route.fulfill(status=status, headers=headers, content_type="application/json", body=json.dumps(body))
        return route.continue_()

    page.route(MESSAGES_URL, handle)


def _chat_on(web_user, pool_name: str):
    return ChatFactory(tenant=web_user.memberships.get().tenant, owner=web_user,
                       pool=ModelPool.objects.get(name=pool_name), title="Errors")


def test_model_unavailable_then_retry_after_it_is_back(chat_page: ChatPage, web_user):
    chat = _chat_on(web_user, "flagship")
    chat_page.open_chat(chat.pk)
    ModelPool.objects.filter(name="flagship").update(enabled=False)
    chat_page.send("Hello?")
    notice = chat_page.notice()
    expect(notice).to_contain_text("This model is unavailable right now")
    assert Message.objects.filter(chat=chat).count() == 0  # nothing half-written

    ModelPool.objects.filter(name="flagship").update(enabled=True)
    notice.get_by_role("button", name="Retry").click()
    run_id = chat_page.latest_run_id()
    final = chat_page.wait_settled(run_id)
    expect(notice).to_be_hidden()
    assert final["text"] == saved_run(run_id).assistant_message.content
    assert list(Message.objects.filter(chat=chat, role="user").values_list("content", flat=True)) == ["Hello?"]


def test_a_refused_first_message_leaves_no_empty_chat(chat_page: ChatPage, web_user):
    from chatsite.chats.models import Chat

    ModelPool.objects.filter(name="flagship").update(enabled=False)
    chat_page.send("Anyone there?")  # a new chat: its start is one request
    notice = chat_page.notice()
    expect(notice).to_contain_text("This model is unavailable right now")
    assert not Chat.objects.filter(owner=web_user).exists()  # no empty chat left behind

    ModelPool.objects.filter(name="flagship").update(enabled=True)
    notice.get_by_role("button", name="Retry").click()
    run_id = chat_page.latest_run_id()
    assert chat_page.wait_settled(run_id)["text"] == saved_run(run_id).assistant_message.content
    chat, = Chat.objects.filter(owner=web_user)
    assert list(Message.objects.filter(chat=chat, role="user").values_list("content", flat=True)) == ["Anyone there?"]
    assert chat_page.page.url.endswith(f"/c/{chat.pk}/")


def test_overloaded_counts_down_retry_after_then_retries(chat_page: ChatPage):
    page = chat_page.page
    _fail_first_post(page, 503, {"error": {"code": "overloaded", "message": "model 'flagship' is busy"}}, retry_after=2)
    chat_page.send("Busy?")
    notice = chat_page.notice()
    expect(notice).to_contain_text("The server is busy")
    retry = notice.get_by_role("button", name=re.compile("Retry"))
    expect(retry).to_have_text(re.compile(r"Retry in [12] s"))
    expect(retry).to_be_disabled()
    expect(retry).to_have_text("Retry", timeout=4000)
    retry.click()
    run_id = chat_page.latest_run_id()
    assert chat_page.wait_settled(run_id)["text"] == saved_run(run_id).assistant_message.content


def test_budget_exhausted_is_explained(chat_page: ChatPage):
    page = chat_page.page
    _fail_first_post(page, 429, {"error": {"code": "rate_limited",
                                           "message": "your team's token budget for this day is used up"}}, retry_after=1)
    chat_page.send("More please")
    notice = chat_page.notice()
    expect(notice).to_contain_text("budget is used up")
    expect(notice).to_contain_text("your team's token budget for this day is used up")
    notice.get_by_role("button", name="Retry").click(timeout=4000)
    chat_page.wait_settled(chat_page.latest_run_id())


def test_a_reply_already_in_progress_is_shown_and_followed(chat_page: ChatPage, web_user):
    chat = _chat_on(web_user, "flagship")
    chat_page.open_chat(chat.pk)
    # another window starts a long reply in this chat: this page shows it and follows it live
    started = chat_page.api("POST", f"/api/chats/{chat.pk}/messages/", {"content": "From elsewhere", **LONG_REPLY})
    assert started["status"] == 202
    other = started["data"]["run"]["id"]
    expect(chat_page.article(other)).to_be_visible()
    expect(chat_page.page.get_by_text("From elsewhere")).to_be_visible()
    chat_page.wait_tokens(other, 5)  # streaming here, from the other window's run
    chat_page.page.get_by_role("button", name="Stop generating").click()
    assert chat_page.wait_settled(other)["status"] == "cancelled"
    chat_page.send("Me too")
    run_id = chat_page.wait_new_run(other)
    chat_page.wait_settled(run_id)
    assert saved_run(run_id).user_message.content == "Me too"


def test_a_reply_in_progress_this_page_missed_is_refused_in_words(chat_page: ChatPage, web_user):
    chat = _chat_on(web_user, "flagship")
    # this page's live connection is down, so it cannot learn of the other window's
    # reply before it sends: the server's refusal is what tells it
    chat_page.page.route(f"{chat_page.live_url}/events*", lambda route: route.abort())
    chat_page.open_chat(chat.pk)
    started = chat_page.api("POST", f"/api/chats/{chat.pk}/messages/", {"content": "From elsewhere", **LONG_REPLY})
    assert started["status"] == 202
    chat_page.send("Me too")
    notice = chat_page.notice()
    expect(notice).to_contain_text("A reply is already being written")
    other = started["data"]["run"]["id"]
    assert chat_page.api("POST", f"/api/runs/{other}/cancel")["status"] == 200  # the other window stops it
    saved_run(other)
    notice.get_by_role("button", name="Retry").click()
    run_id = chat_page.latest_run_id()
    chat_page.wait_settled(run_id)
    assert saved_run(run_id).user_message.content == "Me too"


def test_a_failed_generation_keeps_the_partial_text_and_offers_retry(chat_page: ChatPage):
    page = chat_page.page
    chat_page.send(f"please {FAIL_MARKER}")
    run_id = chat_page.latest_run_id()
    final = chat_page.wait_settled(run_id)
    run = saved_run(run_id)
    assert final["status"] == run.status == "failed"
    assert final["text"] == run.assistant_message.content
    notice = chat_page.notice()
    expect(notice).to_contain_text("The reply could not be finished")
    expect(notice).to_contain_text("injected engine failure")

    page.reload()  # the server renders the failure the same way
    expect(chat_page.notice()).to_contain_text("The reply could not be finished")
    chat_page.notice().get_by_role("button", name="Retry").click()  # a new version of the reply, same question
    second = chat_page.wait_new_run(run_id)
    chat_page.wait_settled(second)
    assert saved_run(second).user_message_id == run.user_message_id
    expect(page.locator(".msg-user")).to_have_count(1)
    expect(chat_page.article(second).locator(".versions")).to_have_text("‹2 / 2›")
