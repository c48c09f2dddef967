"""Two windows of one user stay in step without a reload: a message sent or a
reply started in one appears in the other, and the sidebar follows (a new chat,
a rename, a delete), through the user's one event stream."""
import pytest

from tests.web.pages import ChatPage, expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_second_window_follows_messages_replies_and_the_sidebar(chat_page: ChatPage, context):
    other = ChatPage(context.new_page(), chat_page.live_url)
    other.page.goto(chat_page.live_url + "/")
    other.page.wait_for_function("() => window.ChatUI && ChatUI.liveStream")

    chat_page.set_send_extra({"max_tokens": 200, "ignore_eos": True})
    chat_page.send("Hello from window one")
    run_id = chat_page.latest_run_id()
    chat_id = chat_page.page.evaluate("() => ChatUI.state.chat.id")
    link = other.page.locator(f'[data-chat-link="{chat_id}"]')
    expect(link).to_have_text("Hello from window one")  # the new chat, listed without a reload

    other.open_chat(chat_id)  # follows the reply in progress...
    expect(other.article(run_id)).to_have_attribute("aria-busy", "true")
    chat_page.wait_settled(run_id)
    final = other.wait_settled(run_id)
    assert final["text"] == chat_page.reply(run_id)["text"]

    # ...and a turn started in window one appears in window two by itself
    chat_page.set_send_extra({"max_tokens": 30, "ignore_eos": True})
    chat_page.send("And a second question")
    second = chat_page.wait_new_run(run_id)
    expect(other.page.locator(".msg-user .bubble").last).to_have_text("And a second question")
    expect(other.article(second)).to_be_visible()
    assert other.wait_settled(second)["text"] == chat_page.wait_settled(second)["text"]

    # a regenerate in window two switches window one's path too
    other.article(second).get_by_role("button", name="Regenerate this reply").click()
    third = other.wait_new_run(second)
    expect(chat_page.article(third)).to_be_visible()
    expect(chat_page.article(second)).to_have_count(0)
    other.wait_settled(third)

    chat_page.page.get_by_label("Chat options").click()
    chat_page.page.get_by_label("Rename chat").fill("Renamed elsewhere")
    chat_page.page.get_by_label("Rename chat").press("Enter")
    expect(link).to_have_text("Renamed elsewhere")
    expect(other.page.locator("#chat-title")).to_have_text("Renamed elsewhere")

    third_window = ChatPage(context.new_page(), chat_page.live_url)
    third_window.page.goto(chat_page.live_url + "/")
    third_link = third_window.page.locator(f'[data-chat-link="{chat_id}"]')
    expect(third_link).to_be_visible()
    # deleted from the window on the home page: the two on the chat go home as it goes
    resp = third_window.api("DELETE", f"/api/chats/{chat_id}/")
    assert resp["status"] == 204
    expect(third_link).to_have_count(0)  # gone from the list
    other.page.wait_for_url(chat_page.live_url + "/")  # the open chat was deleted: back to a new chat
    third_window.page.close()
    other.page.close()


def test_the_event_stream_needs_a_session_and_a_well_formed_cursor(chat_page: ChatPage, live_url):
    import httpx

    assert httpx.get(f"{live_url}/events", timeout=5).status_code == 401
    bad = chat_page.page.evaluate("""async () => { const r = await fetch('/events?after=nope');
                                     return [r.status, (await r.json()).error.code]; }""")
    assert bad == [400, "invalid_last_event_id"]
