"""Sending, as a person meets its edges: a message over the length limit is counted before
it is sent and kept; a refused message comes back to edit or is retried; the jump arrow
leaves when the thread shrinks; a reply's figures come with its end."""
import json
import re

import pytest

from chatsite.chats.models import Message
from chatsite.pools.models import ModelPool
from inference.fake_backend import FAIL_MARKER
from tests.web.pages import ChatPage, expect, saved_run
from tests.web.seed import READ_A_FILE, seed_chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
LIMIT = 32000


def test_a_message_over_the_limit_is_counted_before_sending_and_kept(sized_page: ChatPage, web_user):
    page = sized_page.page
    box = page.get_by_label("Message", exact=True)
    count = page.locator("#composer-count")
    box.fill("a" * 20000)
    expect(count).to_be_hidden()  # far from the limit: nothing to say
    box.fill("word " * 6300)  # 31,500 characters
    expect(count).to_have_text("31,500 / 32,000 characters")
    long_text = "b" * 67500
    box.fill(long_text)
    expect(count).to_contain_text("Too long to send: 67,500 characters, 35,500 over the limit of 32,000")
    expect(page.get_by_role("button", name="Send message")).to_be_disabled()
    box.press("Enter")
    expect(count).to_have_attribute("role", "alert")
    assert box.input_value() == long_text  # nothing lost
    assert not Message.objects.filter(chat__owner=web_user).exists()  # and nothing sent

    box.fill(long_text[:LIMIT])  # at the limit: sendable (the test pools' context is too small to answer it)
    expect(count).to_have_text("32,000 / 32,000 characters")
    expect(page.get_by_role("button", name="Send message")).to_be_enabled()
    box.fill("Short again")
    expect(count).to_be_hidden()
    box.press("Enter")
    sized_page.wait_settled(sized_page.latest_run_id())


def _refuse_first_post(page, status: int, error: dict):
    calls = []

    def handle(route):
        if route.request.method == "POST" and not calls:
            calls.append(route.request.post_data)
            return route.fulfill(status=status, content_type="application/json", body=json.dumps({"error": error}))
        return route.continue_()

    page.route(re.compile(r".*/api/chats/(\d+/messages/)?$"), handle)


def test_a_refused_message_is_told_in_words_and_comes_back_to_edit(sized_page: ChatPage):
    page = sized_page.page
    _refuse_first_post(page, 400, {"code": "invalid_request", "field": "message.content",
                                   "message": "message.content is 40000 characters; the limit is 32000"})
    sized_page.send("Please summarise this.")
    notice = sized_page.notice()
    expect(notice).to_contain_text("Your message is too long to send")
    expect(notice).to_contain_text("It is 40,000 characters; one message can hold 32,000.")
    expect(notice.get_by_role("button", name="Retry")).to_be_visible()
    notice.get_by_role("button", name="Edit this message").click()
    box = page.get_by_label("Message", exact=True)
    expect(box).to_have_value("Please summarise this.")
    expect(box).to_be_focused()
    expect(page.locator(".msg-user")).to_have_count(0)  # the unsent bubble went back into the box
    expect(notice).to_have_count(0)
    box.press("End")
    box.type(" Briefly.")
    box.press("Enter")
    run_id = sized_page.latest_run_id()
    sized_page.wait_settled(run_id)
    assert saved_run(run_id).user_message.content == "Please summarise this. Briefly."


def test_every_failed_send_offers_retry_and_edit(chat_page: ChatPage):
    page = chat_page.page
    _refuse_first_post(page, 404, {"code": "not_found", "message": "no such chat"})  # not worth retrying as such
    chat_page.send("Still there?")
    notice = chat_page.notice()
    expect(notice).to_contain_text("This chat no longer exists")
    expect(notice.get_by_role("button", name="Edit this message")).to_be_visible()
    notice.get_by_role("button", name="Retry").click()
    chat_page.wait_settled(chat_page.latest_run_id())
    expect(page.locator(".msg-user .bubble")).to_have_text(["Still there?"])
    expect(page.locator(".msg-user.unsent")).to_have_count(0)


def test_a_failed_reply_offers_retry_and_an_edit_of_its_question(chat_page: ChatPage):
    page = chat_page.page
    chat_page.send(f"please {FAIL_MARKER}")
    run_id = chat_page.latest_run_id()
    assert chat_page.wait_settled(run_id)["status"] == "failed"
    notice = chat_page.notice()
    expect(notice.get_by_role("button", name="Retry")).to_be_visible()
    notice.get_by_role("button", name="Edit this message").click()
    box = page.get_by_label("Edit your message")
    expect(box).to_be_focused()
    expect(box).to_have_value(f"please {FAIL_MARKER}")
    box.fill("please answer")
    box.press("Enter")
    second = chat_page.wait_new_run(run_id)
    assert chat_page.wait_settled(second)["status"] == "completed"
    assert saved_run(second).user_message.content == "please answer"


def test_the_jump_arrow_goes_when_an_edit_shortens_the_thread(chat_page: ChatPage, web_user):
    pool = ModelPool.objects.get(name="flagship")
    chat = seed_chat(user=web_user, pool=pool, turns=[(f"Question {i}", READ_A_FILE) for i in range(4)])
    page = chat_page.page
    chat_page.open_chat(chat.pk)
    page.wait_for_selector(".stats")
    jump = page.get_by_role("button", name="Scroll to the latest message")
    page.locator("#scroller").evaluate("s => { s.scrollTop = 0; }")
    expect(jump).to_be_visible()

    chat_page.set_send_extra({"max_tokens": 4, "ignore_eos": True})
    first = page.locator(".msg-user").first
    first.hover()
    first.get_by_role("button", name="Edit this message").click()
    page.get_by_label("Edit your message").fill("Just one question")
    known = chat_page.latest_run_id()  # read before sending: the new run may be on the page when Enter returns
    page.get_by_label("Edit your message").press("Enter")
    chat_page.wait_settled(chat_page.wait_new_run(known))
    expect(page.locator(".msg-user")).to_have_count(1)
    assert page.locator("#scroller").evaluate("s => s.scrollHeight <= s.clientHeight + 72")  # all of it in view
    expect(jump).to_be_hidden()


# Every .stats line the reply's footer shows, in order (a MutationObserver on the thread).
WATCH_STATS = """() => { window.__stats = [];
    new MutationObserver(() => { for (const s of document.querySelectorAll('#thread .stats')) {
        if (!s.__seen) { s.__seen = true; window.__stats.push(s.textContent); } } })
      .observe(document.getElementById('thread'), {childList: true, subtree: true}); }"""


def test_the_first_replys_figures_come_with_its_end(chat_page: ChatPage):
    page = chat_page.page
    page.evaluate(WATCH_STATS)
    chat_page.set_send_extra({"max_tokens": 30, "ignore_eos": True})
    chat_page.send("Hello")
    run_id = chat_page.latest_run_id()
    chat_page.wait_settled(run_id)
    run = saved_run(run_id)
    # the saved figures fetched after it are the same
    page.wait_for_function("id => ChatUI.replies[id].run.finished_at", arg=run_id)
    first, *_ = page.evaluate("() => window.__stats")
    assert "to first token" in first and "tok/s" in first, first
    assert f"{run.ttft_ms} ms to first token" in first or run.ttft_ms >= 1000, (first, run.ttft_ms)
    assert f"{1000 / run.itl_ms:.1f} tok/s" in first, (first, run.itl_ms)
    expect(chat_page.article(run_id).locator(".stats")).to_have_text(first)
