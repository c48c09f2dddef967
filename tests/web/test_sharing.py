"""Sharing a chat in the browser: the owner makes a link from the chat's menu, a visitor
with no account opens it and follows the reply being written to the owner's very text,
and when the owner revokes the link the visitor is cut off and the link opens nothing."""
import re

import pytest

from tests.web.pages import LONG_REPLY, ChatPage, expect, saved_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _make_link(owner: ChatPage) -> str:
    owner.page.get_by_label("Chat options").click()
    owner.page.get_by_role("button", name="Share…").click()
    dialog = owner.page.locator("#share-dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Create a link").click()
    url = dialog.get_by_label("The new link (shown once: copy it now)")
    expect(url).to_have_value(re.compile(r"/s/[\w-]{32,}$"))
    expect(dialog.locator(".share-list li")).to_have_count(1)
    expect(dialog.locator(".share-list li")).to_contain_text("Link made")
    return url.input_value()


# What the page was when it loaded, before any of the stream's events could arrive (its scripts
# run before DOMContentLoaded): a reply's article busy or not, and its text at that moment.
AT_LOAD = """window.atLoad = {};
document.addEventListener("DOMContentLoaded", () => {
  for (const a of document.querySelectorAll("article[data-run-id]")) {
    const reply = window.ChatUI && ChatUI.shared && ChatUI.shared.replies[a.dataset.runId];
    window.atLoad[a.dataset.runId] = { busy: a.getAttribute("aria-busy"), text: reply ? reply.text : null };
  }
});"""


def _follow(visitor, url: str, run_id: int) -> None:
    visitor.goto(url)
    visitor.wait_for_function("id => window.ChatUI && ChatUI.shared && ChatUI.shared.replies[id]", arg=run_id)


def test_a_visitor_follows_a_shared_reply_live_until_the_owner_revokes_the_link(chat_page: ChatPage, browser):
    chat_page.set_send_extra({"max_tokens": 20})
    chat_page.send("A first question")
    first = chat_page.latest_run_id()
    chat_page.wait_settled(first)
    url = _make_link(chat_page)
    chat_page.page.get_by_role("button", name="Done").click()

    chat_page.set_send_extra(LONG_REPLY)
    second = chat_page.send_for_new_run("Tell me a long story")
    chat_page.wait_tokens(second, 30)  # the visitor joins late

    stranger = browser.new_context()  # no account, no cookies
    try:
        visitor = stranger.new_page()
        visitor.add_init_script(AT_LOAD)
        _follow(visitor, url, second)
        robots = visitor.locator('meta[name="robots"]')
        expect(robots).to_have_attribute("content", "noindex, nofollow")
        expect(visitor.locator("#composer-input, #sidebar, textarea")).to_have_count(0)  # read-only, no chat list
        expect(visitor.locator(".msg-user .bubble")).to_have_text(["A first question", "Tell me a long story"])
        # The reply may end before a look at the page (500 tokens in ~5 s): what it was at load is kept.
        at_load = visitor.evaluate("id => window.atLoad[id]", second)
        assert at_load["busy"] == "true"
        visitor.wait_for_function("id => ChatUI.shared.replies[id].state === 'done'", arg=second, timeout=60000)
        seen = visitor.evaluate("id => ChatUI.shared.replies[id].text", second)
        assert seen == saved_run(second).assistant_message.content == chat_page.wait_settled(second)["text"]
        assert seen.startswith(at_load["text"]) and len(seen) > len(at_load["text"])  # the rest came live
        expect(visitor.locator(f'article[data-run-id="{second}"]')).not_to_have_attribute("aria-busy", "true")

        # a second long reply; the owner revokes the link while the visitor follows it
        third = chat_page.send_for_new_run("And another one")
        _follow(visitor, url, third)
        visitor.wait_for_function("id => ChatUI.shared.replies[id].text.length > 0", arg=third)
        chat_page.page.get_by_label("Chat options").click()
        chat_page.page.get_by_role("button", name="Share…").click()
        chat_page.page.locator("#share-dialog .share-list li").get_by_role("button").click()
        expect(chat_page.page.locator("#share-dialog .share-list li")).to_have_count(0)
        visitor.wait_for_function("id => ChatUI.shared.replies[id].state === 'ended'", arg=third, timeout=10000)
        expect(visitor.get_by_role("status").filter(has_text="no longer shared")).to_be_visible()
        cut = visitor.evaluate("id => ChatUI.shared.replies[id].text", third)
        assert len(cut) < len(saved_run(third).assistant_message.content)  # cut off mid-reply

        gone = visitor.goto(url)
        assert gone.status == 404
        expect(visitor.get_by_role("heading", name="Not found")).to_be_visible()  # the product's own page
    finally:
        stranger.close()
