"""Typing while a reply streams: Enter queues the message above the composer, every
window shows the queue, and "Send now" stops the reply (kept, interrupted) and runs the
message next, with that reply in its context."""
import time

import pytest

from chatsite.chats.models import QueuedMessage
from chatsite.quotas.models import TenantQuota
from chatsite.runs.models import GenerationRun
from chatsite.runs.services import run_finalize
from chatsite.runs.stream import codec
from tests.factories import ChatFactory, queueing_pool
from tests.runs.helpers import end_stream, xadd_tokens
from tests.web.pages import LONG_REPLY, ChatPage, expect, saved_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
INTERRUPTED = "Interrupted: a queued message was sent now"


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
    for page in (chat_page, other):
        page.watch_badges(first)
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
    for page in (chat_page, other):  # live, in the window that steered and in the others, never "Stopped"
        expect(page.article(first).get_by_text("Interrupted")).to_be_visible(timeout=10_000)
        seen = page.badges_seen()
        assert "Stopped" not in seen and seen[-1] == INTERRUPTED, seen
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


def _send_now_on_a_written_reply(chat_page: ChatPage, other: ChatPage, chat) -> int | None:
    """A fake worker writes a long reply; a message queued behind it is sent now from the first
    window. Returns the stopped reply's run, or None when the reply ended before the send now
    reached it (500 tokens take ~5 s: a loaded box can spend that between the two)."""
    for page in (chat_page, other):
        page.open_chat(chat.pk)
        page.page.wait_for_function("() => window.ChatUI && ChatUI.liveStream")
    chat_page.set_send_extra(LONG_REPLY)  # ~5 s at the fake engine's 10 ms a token
    chat_page.send("Tell me a long story")
    first = chat_page.latest_run_id()
    chat_page.wait_tokens(first, 5)
    chat_page.set_send_extra({"max_tokens": 3})
    chat_page.send("Stop and answer this")
    expect(chat_page.page.locator("#queue .queued-text")).to_have_text(["Stop and answer this"], timeout=20_000)
    for page in (chat_page, other):  # every label the reply's footer ever shows, from here on
        page.watch_badges(first)
    # The other window hears of the send now late (as on a loaded box): its stream's end comes first.
    other.page.evaluate("""() => { const heard = ChatUI.queue.onEvent;
        ChatUI.queue.onEvent = (ev) => setTimeout(() => heard(ev), 1500); }""")
    if GenerationRun.objects.get(pk=first).status in GenerationRun.TERMINAL:
        return None
    chat_page.page.locator("#queue .queued").get_by_role("button", name="Send now").click()
    stopping = saved_run(first)  # its end: saved once the send now stopped it (maybe before the send now's commit)
    if stopping.finish_reason == "length":
        return None
    assert stopping.finish_reason == "interrupted"  # as saved, whichever of the two commits came first
    end = time.monotonic() + 10
    while QueuedMessage.objects.get(chat=chat).interrupted_run_id != first:  # the send now's own commit
        assert time.monotonic() < end, "the send now never named the reply it stopped"
        time.sleep(0.02)
    return first


def test_send_now_on_a_reply_a_worker_writes_says_interrupted_live_in_every_window(chat_page: ChatPage, context,
                                                                                     web_user, pools):
    # A fake worker writes the reply and stops it at a token boundary (the done event then
    # says "cancelled"; its saved run, "interrupted").
    other = ChatPage(context.new_page(), chat_page.live_url)
    for _ in range(3):  # a new chat for each try whose reply ended first
        chat = ChatFactory(tenant=web_user.memberships.get().tenant, owner=web_user, pool=pools["flagship"])
        if (first := _send_now_on_a_written_reply(chat_page, other, chat)) is not None:
            break
    else:
        pytest.fail("three replies of 500 tokens each ended before the send now reached them")
    for page in (chat_page, other):  # the window that steered, and the other, without a reload
        page.wait_settled(first)
        expect(page.article(first).locator(".badge")).to_have_text(INTERRUPTED, timeout=10_000)
        # Never "Stopped", not for a moment, whichever of the stream's end and the send now's news
        # reaches the window first: until it knows why the reply stopped, it carries no label.
        seen = page.badges_seen()
        assert "Stopped" not in seen and seen[-1] == INTERRUPTED, seen
    assert saved_run(first).finish_reason == "interrupted"


def test_a_queued_message_refused_when_its_turn_comes_shows_why_in_every_window(chat_page: ChatPage, context,
                                                                                web_user, pools):
    tenant = web_user.memberships.get().tenant
    # The first reply is in a pool no worker serves: the test ends it, once the budget is set.
    chat = ChatFactory(tenant=tenant, owner=web_user, pool=queueing_pool("ghost"))
    other = ChatPage(context.new_page(), chat_page.live_url)
    for page in (chat_page, other):
        page.open_chat(chat.pk)
        page.page.wait_for_function("() => window.ChatUI && ChatUI.liveStream")
    chat_page.send("Tell me a story")
    first = chat_page.latest_run_id()
    chat_page.set_send_extra({"model": "flagship", "max_tokens": 3})
    chat_page.send("And another")
    expect(chat_page.page.locator("#queue .queued-text")).to_have_text(["And another"], timeout=20_000)
    quota = TenantQuota.objects.create(tenant=tenant, token_budget=1)  # the first reply uses it up
    xadd_tokens(first, ["Once"])
    end_stream(first, codec.done_fields(finish_reason="stop", prompt_tokens=3, completion_tokens=1))
    run_finalize(run_id=first)  # as its worker would
    chat_page.wait_settled(first)
    for page in (chat_page, other):
        refused = page.page.locator("#queue .queued.refused")
        expect(refused.locator(".queued-text")).to_have_text("And another", timeout=20_000)
        expect(refused.locator(".queued-why")).to_contain_text("Not sent: your team's token budget")
    assert QueuedMessage.objects.get().state == "refused"

    quota.delete()
    other.page.locator("#queue .queued.refused").get_by_role("button", name="Retry").click()
    for page in (chat_page, other):
        expect(page.page.locator(".msg-user .bubble")).to_have_text(["Tell me a story", "And another"],
                                                                    timeout=20_000)
        expect(page.page.locator("#queue")).to_be_hidden()


def test_a_plain_send_while_messages_wait_goes_behind_them(chat_page: ChatPage, web_user, pools):
    # The moment between a reply's end and its queue's start: a message waits, no reply runs.
    chat = ChatFactory(tenant=web_user.memberships.get().tenant, owner=web_user, pool=pools["flagship"])
    chat_page.open_chat(chat.pk)
    chat_page.page.wait_for_function("() => window.ChatUI && ChatUI.liveStream")
    QueuedMessage.objects.create(chat=chat, tenant=chat.tenant, owner=chat.owner, content="Waiting first",
                                 position=0, request={"sampling": {"max_tokens": 3}})
    chat_page.set_send_extra({"max_tokens": 3})
    chat_page.send("Sent plainly")
    expect(chat_page.page.locator(".msg-user .bubble")).to_have_text(["Waiting first", "Sent plainly"],
                                                                     timeout=20_000)
    expect(chat_page.page.locator(".msg-user.unsent")).to_have_count(0)
    assert [m.state for m in QueuedMessage.objects.order_by("id")] == ["started", "started"]
