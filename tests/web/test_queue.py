"""Typing while a reply streams: Enter queues the message above the composer, every
window shows the queue, and "Send now" stops the reply (kept, interrupted) and runs the
message next, with that reply in its context."""
import pytest

from chatsite.chats.models import QueuedMessage
from tests.factories import ChatFactory, queueing_pool
from tests.runs.helpers import xadd_tokens
from tests.web.pages import ChatPage, expect, saved_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_enter_during_a_reply_queues_and_send_now_steers(chat_page: ChatPage, context, web_user, pools):
    # The first reply is in a pool no worker serves: this test writes its tokens, as a worker
    # would, so it is still being written whenever the test gets there, however loaded the
    # machine. The queued messages ask for the fake workers' pool.
    chat = ChatFactory(tenant=web_user.memberships.get().tenant, owner=web_user, pool=queueing_pool("ghost"))
    other = ChatPage(context.new_page(), chat_page.live_url)  # a second window on the same chat
    for page in (chat_page, other):
        page.open_chat(chat.pk)
        page.page.wait_for_function("() => window.ChatUI && ChatUI.liveStream")
    chat_page.send("Tell me a long story")
    first = chat_page.latest_run_id()
    xadd_tokens(first, ["Once", " upon", " a"])
    chat_page.wait_tokens(first, 3)
    chat_page.set_send_extra({"model": "flagship", "max_tokens": 5})
    chat_page.send("Later, a follow-up")
    chat_page.send("Actually, stop and answer this")
    waiting = ["Later, a follow-up", "Actually, stop and answer this"]
    expect(chat_page.page.locator("#queue .queued-text")).to_have_text(waiting, timeout=20_000)
    expect(chat_page.page.get_by_label("Message", exact=True)).to_have_value("")  # the box is free again
    expect(other.page.locator("#queue .queued-text")).to_have_text(waiting, timeout=20_000)  # every window shows it
    other.page.locator("#queue .queued").nth(1).get_by_role("button", name="Send now").click()
    stopped = chat_page.wait_settled(first)
    assert stopped["status"] == "cancelled" and stopped["text"] == "Once upon a"
    turns = ["Tell me a long story", "Actually, stop and answer this", "Later, a follow-up"]  # steered, then the rest
    for page in (chat_page, other):
        expect(page.page.locator(".msg-user .bubble")).to_have_text(turns, timeout=30_000)
        expect(page.page.locator("#queue")).to_be_hidden()
    later, steered = QueuedMessage.objects.order_by("id")
    assert (later.state, steered.state, steered.interrupted_run_id) == ("started", "started", first)
    assert steered.run_id < later.run_id  # one at a time, the steered one first
    chat_page.wait_settled(later.run_id)

    saved = saved_run(first)
    assert saved.finish_reason == "interrupted" and saved.assistant_message.content == "Once upon a"
    assert saved_run(steered.run_id).prompt_snapshot[-2] == {"role": "assistant", "content": "Once upon a"}
    chat_page.page.reload()  # the interrupted reply says so
    expect(chat_page.article(first).get_by_text("Interrupted")).to_be_visible()
