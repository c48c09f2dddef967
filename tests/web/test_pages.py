"""Signing in and out, the chat list, the model picker, rename and delete, phone
width and the keyboard alone."""
import pytest

from chatsite.chats.models import Chat
from chatsite.pools.models import ModelPool
from tests.factories import ChatFactory, TenantFactory, UserFactory
from tests.web.pages import ChatPage, expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_sign_in_and_out(context, live_url, web_user):
    page = context.new_page()
    page.goto(live_url + "/")
    assert page.url.startswith(live_url + "/login/")
    page.get_by_label("Username").fill(web_user.username)
    page.get_by_label("Password").fill("wrong password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("don’t match")

    page.get_by_label("Password").fill("test-password-123")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(live_url + "/")
    expect(page.locator(".username")).to_have_text(web_user.username)

    page.get_by_role("button", name="Sign out").click()  # a POST form with its CSRF token
    page.wait_for_url(live_url + "/login/")
    page.goto(live_url + "/")
    assert page.url.startswith(live_url + "/login/")


def test_sidebar_lists_only_my_chats_newest_first(chat_page: ChatPage, web_user):
    tenant = web_user.memberships.get().tenant
    pool = ModelPool.objects.get(name="small")
    older = ChatFactory(tenant=tenant, owner=web_user, pool=pool, title="Older chat")
    newer = ChatFactory(tenant=tenant, owner=web_user, pool=pool, title="Newer chat")
    ChatFactory(tenant=tenant, owner=UserFactory(tenant=tenant), pool=pool, title="Someone else's")
    ChatFactory(tenant=TenantFactory(), owner=web_user, pool=pool, title="Other tenant")
    chat_page.open_chat(older.pk)

    links = chat_page.page.locator("#chat-list a")
    expect(links).to_have_text(["Newer chat", "Older chat"])
    expect(chat_page.page.locator('#chat-list a[aria-current="page"]')).to_have_text("Older chat")
    expect(chat_page.page.get_by_label("Model")).to_have_value("small")
    chat_page.page.goto(f"{chat_page.live_url}/c/{newer.pk + 2}/")  # another user's chat: not found
    expect(chat_page.page.get_by_role("heading", name="Not found")).to_be_visible()


def test_model_picker_shows_unavailable_models_as_such(chat_page: ChatPage):
    page = chat_page.page
    options = page.locator("#model-select option")
    expect(options).to_have_text(["Flagship", "Ghost (unavailable)", "Small"])
    assert page.locator('#model-select option[value="ghost"]').is_disabled()
    expect(page.get_by_label("Model")).to_have_value("flagship")  # the first model that is up
    expect(page.locator("#model-state")).to_have_text("Available")


def test_rename_and_delete_a_chat(chat_page: ChatPage, web_user):
    tenant = web_user.memberships.get().tenant
    chat = ChatFactory(tenant=tenant, owner=web_user, pool=ModelPool.objects.get(name="flagship"), title="Draft")
    page = chat_page.page
    chat_page.open_chat(chat.pk)

    page.get_by_label("Chat options").click()
    rename = page.get_by_label("Rename chat")
    expect(rename).to_be_focused()
    rename.fill("Trip to Lisbon")
    rename.press("Enter")
    expect(page.locator("#chat-title")).to_have_text("Trip to Lisbon")
    expect(page.locator(f'[data-chat-link="{chat.pk}"]')).to_have_text("Trip to Lisbon")
    chat.refresh_from_db()
    assert chat.title == "Trip to Lisbon"

    page.get_by_label("Chat options").click()
    page.get_by_role("button", name="Delete chat").click()
    dialog = page.get_by_role("dialog", name="Delete this chat?")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Cancel").click()
    assert Chat.objects.filter(pk=chat.pk).exists()

    page.get_by_label("Chat options").click()
    page.get_by_role("button", name="Delete chat").click()
    dialog.get_by_role("button", name="Delete").click()
    page.wait_for_url(chat_page.live_url + "/")
    expect(page.get_by_role("status")).to_contain_text("Deleted “Trip to Lisbon”")
    assert not Chat.objects.filter(pk=chat.pk).exists()
    expect(page.locator(f'[data-chat-link="{chat.pk}"]')).to_have_count(0)


def test_phone_width_collapses_the_sidebar_into_a_drawer(browser, live_url, web_user, fake_workers):
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True)
    chat = ChatPage(context.new_page(), live_url)
    chat.sign_in(web_user.username)
    page = chat.page
    sidebar = page.get_by_role("complementary", name="Chats")
    expect(sidebar).to_be_hidden()
    toggle = page.get_by_role("button", name="Show the chat list")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(sidebar).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(page.get_by_role("link", name="New chat")).to_be_focused()
    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(toggle).to_be_focused()

    chat.send("Hi from my phone")
    run_id = chat.latest_run_id()
    chat.wait_settled(run_id)
    box = page.get_by_label("Message", exact=True).bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390  # the composer fits the screen
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390  # nothing scrolls sideways
    context.close()


def test_keyboard_alone_with_visible_focus(chat_page: ChatPage):
    page = chat_page.page
    expect(page.get_by_label("Message", exact=True)).to_be_focused()  # ready to type on arrival
    page.locator(".skip-link").focus()
    order = []
    for _ in range(12):
        page.keyboard.press("Tab")
        order.append(page.evaluate("""() => { const el = document.activeElement;
            const name = (el.labels && el.labels[0] ? el.labels[0].textContent : '') || el.getAttribute('aria-label')
                         || el.textContent.trim();
            const style = getComputedStyle(el);
            return [name.trim(), el.tagName === 'TEXTAREA' || style.outlineStyle !== 'none']; }"""))
    names = [name for name, _ in order]
    assert names[:7] == ["chatsite", "New chat", "Search chats", "Settings", "Sign out", "Model", "Chat settings"], names
    assert names[-1] == "Message", names  # after the four suggestions
    assert all(visible for _, visible in order), order

    page.locator(".skip-link").focus()
    page.keyboard.press("Enter")  # skips straight to the message box
    expect(page.get_by_label("Message", exact=True)).to_be_focused()
    page.keyboard.type("Typed with keys only")
    page.keyboard.press("Enter")
    run_id = chat_page.latest_run_id()
    chat_page.wait_settled(run_id)
    expect(page.locator(".msg-user .bubble")).to_have_text("Typed with keys only")
    expect(page.get_by_label("Message", exact=True)).to_be_focused()
    live = page.locator("#announcer")
    expect(live).to_have_attribute("aria-live", "polite")
    expect(live).to_contain_text("Reply finished")


def test_copy_a_code_block_and_a_whole_reply(chat_page: ChatPage, context, web_user):
    from tests.web.seed import READ_A_FILE, seed_chat

    context.grant_permissions(["clipboard-read", "clipboard-write"])
    chat = seed_chat(user=web_user, pool=ModelPool.objects.get(name="flagship"))
    page = chat_page.page
    chat_page.open_chat(chat.pk)
    reply = page.locator("article.msg-assistant")
    expect(reply.locator(".stats")).to_contain_text("240 ms to first token")
    expect(reply.locator(".stats")).to_contain_text("41.3 tok/s")

    reply.get_by_role("button", name="Copy python code").click()
    expect(reply.locator(".code-copy.copied")).to_have_count(1)
    code = READ_A_FILE.split("```python\n")[1].split("\n```")[0]
    assert page.evaluate("() => navigator.clipboard.readText()") == code

    reply.get_by_role("button", name="Copy this reply").click()
    assert page.evaluate("() => navigator.clipboard.readText()") == READ_A_FILE
