"""A reply streams into the page and ends equal, byte for byte, to the saved message:
sent normally, stopped, reloaded mid-answer, watched from a second window, and
across a moment offline."""
import time

import pytest

from chatsite.chats.models import Chat
from tests.web.pages import LONG_REPLY, ChatPage, expect, saved_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_send_streams_the_reply_token_by_token_and_it_equals_the_saved_message(chat_page: ChatPage, live_url):
    page = chat_page.page
    page.get_by_label("Model").select_option("small")
    chat_page.set_send_extra({"max_tokens": 120, "ignore_eos": True})
    box = page.get_by_label("Message", exact=True)
    box.fill("First line")
    box.press("Shift+Enter")  # a new line, not a send
    box.press_sequentially("second <b>line</b>")
    assert page.evaluate("() => Object.keys(ChatUI.replies).length") == 0
    box.press("Enter")

    run_id = chat_page.latest_run_id()
    lengths = []
    while (state := chat_page.reply(run_id))["status"] not in ("completed", "failed", "cancelled"):
        lengths.append(len(state["text"]))
        time.sleep(0.05)
    final = chat_page.wait_settled(run_id)
    run = saved_run(run_id)

    grown = sorted(set(n for n in lengths if 0 < n < len(final["text"])))
    assert len(grown) >= 3, f"the text should grow in steps while streaming, saw lengths {lengths}"
    assert run.status == "completed" and run.pool.name == "small"
    assert final["text"] == run.assistant_message.content != ""
    assert run.user_message.content == "First line\nsecond <b>line</b>"
    assert page.url == f"{live_url}/c/{run.chat_id}/"
    stats = chat_page.article(run_id).locator(".stats")
    expect(stats).to_contain_text("Small")  # the model as the picker names it
    expect(stats).to_contain_text(f"{run.completion_tokens} tokens")
    expect(stats).to_contain_text("to first token")
    expect(stats).to_contain_text("tok/s")
    if "**bold**" in run.assistant_message.content:  # the fake engine's Markdown words render as Markdown
        expect(chat_page.article(run_id).locator("strong").first).to_have_text("bold")
    expect(page.locator(f'[data-chat-link="{run.chat_id}"]')).to_have_text(Chat.objects.get(pk=run.chat_id).title)


def test_stop_ends_the_reply_and_keeps_what_was_written(chat_page: ChatPage):
    page = chat_page.page
    chat_page.set_send_extra(LONG_REPLY)
    chat_page.send("Tell me a long story.")
    run_id = chat_page.latest_run_id()
    chat_page.wait_tokens(run_id, 15)
    page.get_by_role("button", name="Stop generating").click()

    final = chat_page.wait_settled(run_id)
    run = saved_run(run_id)
    assert final["status"] == run.status == "cancelled"
    assert final["text"] == run.assistant_message.content
    assert 15 <= run.completion_tokens < 500
    expect(chat_page.article(run_id).locator(".badge")).to_have_text("Stopped")
    expect(page.get_by_role("button", name="Send message")).to_be_visible()


def test_reload_mid_answer_shows_the_text_so_far_and_continues(chat_page: ChatPage):
    page = chat_page.page
    chat_page.set_send_extra(LONG_REPLY)
    chat_page.send("Explain everything.")
    run_id = chat_page.latest_run_id()
    chat_page.wait_tokens(run_id, 60)
    before = chat_page.reply(run_id)["text"]

    page.reload(wait_until="commit")
    page.wait_for_function("() => window.ChatUI && ChatUI.replies")
    in_html = page.evaluate(f"""() => JSON.parse(document.getElementById('page-data').textContent)
                                      .messages.find(m => m.run && m.run.id === {run_id}).content""")
    page.wait_for_function("() => ChatUI.metrics.firstLiveTokenMs !== null", timeout=10000)
    timing = page.evaluate("""() => ({firstLiveTokenMs: ChatUI.metrics.firstLiveTokenMs,
        firstPaintMs: (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime || 0})""")
    final = chat_page.wait_settled(run_id)
    run = saved_run(run_id)

    print(f"\nreload mid-answer: {len(in_html)} chars in the first paint at {timing['firstPaintMs']:.0f} ms, "
          f"first new token appended at {timing['firstLiveTokenMs']:.0f} ms after navigation start")
    assert in_html.startswith(before) and before  # the text so far is in the HTML itself
    assert final["text"] == run.assistant_message.content
    assert final["text"].startswith(before)
    assert run.status == "completed" and run.completion_tokens == 500


def test_a_second_window_attaches_to_the_reply_in_progress(chat_page: ChatPage, context):
    chat_page.set_send_extra({"max_tokens": 300, "ignore_eos": True})
    chat_page.send("Count slowly.")
    run_id = chat_page.latest_run_id()
    chat_page.wait_tokens(run_id, 20)

    second = ChatPage(context.new_page(), chat_page.live_url)
    second.page.goto(chat_page.page.url)
    expect(second.page.get_by_role("button", name="Stop generating")).to_be_visible()
    first_final = chat_page.wait_settled(run_id)
    second_final = second.wait_settled(run_id)
    saved = saved_run(run_id).assistant_message.content
    assert first_final["text"] == second_final["text"] == saved


def test_offline_for_a_moment_reconnects_without_losing_or_doubling_text(chat_page: ChatPage, context):
    page = chat_page.page
    chat_page.set_send_extra(LONG_REPLY)
    chat_page.send("Keep going.")
    run_id = chat_page.latest_run_id()
    chat_page.wait_tokens(run_id, 30)

    context.set_offline(True)
    pill = page.locator("#conn .conn-pill")
    expect(pill).to_be_visible()
    time.sleep(1.0)  # tokens keep being written on the server meanwhile
    context.set_offline(False)
    expect(pill).to_be_hidden(timeout=10000)

    final = chat_page.wait_settled(run_id)
    run = saved_run(run_id)
    assert final["connects"] >= 2
    assert final["text"] == run.assistant_message.content
    assert run.completion_tokens == 500 and final["have"] == 500


def test_the_page_follows_new_text_only_while_the_reader_is_at_the_bottom(chat_page: ChatPage, web_user):
    from chatsite.pools.models import ModelPool
    from tests.web.seed import READ_A_FILE, seed_chat

    chat = seed_chat(user=web_user, pool=ModelPool.objects.get(name="flagship"),
                     turns=[(f"Question {i}?", READ_A_FILE) for i in range(4)])
    page = chat_page.page
    chat_page.open_chat(chat.pk)
    gap = "() => { const s = document.getElementById('scroller'); return s.scrollHeight - s.scrollTop - s.clientHeight; }"
    assert page.evaluate(gap) < 80  # opens at the latest message
    chat_page.set_send_extra(LONG_REPLY)
    run_id = chat_page.send_for_new_run("One more?")
    chat_page.wait_tokens(run_id, 30)
    assert page.evaluate(gap) < 80  # followed the reply as it grew

    page.locator("#scroller").evaluate("s => { s.scrollTop = 200; }")
    have = chat_page.reply(run_id)["have"]
    chat_page.wait_tokens(run_id, have + 40)
    assert page.locator("#scroller").evaluate("s => s.scrollTop") == 200  # reading up there: nothing moved
    jump = page.get_by_role("button", name="Scroll to the latest message")
    expect(jump).to_be_visible()
    jump.click()
    expect(jump).to_be_hidden()
    have = chat_page.reply(run_id)["have"]
    chat_page.wait_tokens(run_id, have + 40)
    assert page.evaluate(gap) < 80  # back at the bottom: follows again
    page.get_by_role("button", name="Stop generating").click()
    chat_page.wait_settled(run_id)
