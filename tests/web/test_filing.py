"""Pin and archive a chat from its menu: a pinned chat heads the list, an archived one
leaves it (search still finds it, and it can be restored); another window follows."""
import pytest

from chatsite.chats.models import Chat
from chatsite.pools.models import ModelPool
from tests.factories import ChatFactory
from tests.web.pages import ChatPage, expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _chats(web_user, *titles):
    tenant, pool = web_user.memberships.get().tenant, ModelPool.objects.get(name="flagship")
    return [ChatFactory(tenant=tenant, owner=web_user, pool=pool, title=t) for t in titles]


def test_pin_then_archive_then_restore(sized_page: ChatPage, web_user):
    chat_page = sized_page
    trip, _, newest = _chats(web_user, "Trip to Lisbon", "Groceries", "Tax return")
    page = chat_page.page
    chat_page.open_chat(trip.pk)
    other = ChatPage(page.context.new_page(), chat_page.live_url)  # a second window follows
    other.open_chat(newest.pk)
    links = page.locator("#chat-list a")
    expect(links).to_have_text(["Tax return", "Groceries", "Trip to Lisbon"])

    page.get_by_label("Chat options").click()
    page.get_by_role("button", name="Pin chat").click()
    expect(page.locator('[data-group="Pinned"] a')).to_have_text(["Trip to Lisbon"])
    expect(links).to_have_text(["Trip to Lisbon", "Tax return", "Groceries"])
    expect(other.page.locator('[data-group="Pinned"] a')).to_have_text(["Trip to Lisbon"])
    page.reload()
    expect(page.locator('[data-group="Pinned"] a')).to_have_text(["Trip to Lisbon"])

    page.get_by_label("Chat options").click()
    page.get_by_role("button", name="Archive chat").click()
    expect(page.get_by_role("status").filter(has_text="Chat archived")).to_be_visible()
    expect(links).to_have_text(["Tax return", "Groceries"])
    expect(other.page.locator("#chat-list a")).to_have_text(["Tax return", "Groceries"])
    expect(page.locator("#chat-title")).to_have_attribute("data-archived", "")
    assert Chat.objects.get(pk=trip.pk).archived_at is not None

    drawer = page.get_by_role("button", name="Show the chat list")
    if drawer.is_visible():  # a phone: the list is a drawer
        drawer.click()
    page.get_by_label("Search chats").fill("Lisbon")
    expect(page.locator("[data-search-result]")).to_have_text(["Trip to Lisbon"])
    page.get_by_label("Search chats").fill("")
    page.keyboard.press("Escape")

    page.get_by_label("Chat options").click()
    page.get_by_role("button", name="Restore from the archive").click()
    expect(links).to_have_text(["Trip to Lisbon", "Tax return", "Groceries"])  # pinned still
    expect(page.locator("#chat-title")).not_to_have_attribute("data-archived", "")
    page.get_by_label("Chat options").click()
    page.get_by_role("button", name="Unpin chat").click()
    expect(page.locator('[data-group="Pinned"]')).to_have_count(0)
    page.get_by_label("Chat options").click()
    expect(page.get_by_role("button", name="Delete chat")).to_be_visible()  # delete stays


def test_a_new_message_brings_an_archived_chat_back(chat_page: ChatPage, web_user):
    trip, = _chats(web_user, "Trip to Lisbon")
    Chat.objects.filter(pk=trip.pk).update(archived_at=trip.updated_at)
    page = chat_page.page
    chat_page.open_chat(trip.pk)
    expect(page.locator("#chat-list a")).to_have_count(0)
    chat_page.send("One more question")
    chat_page.wait_settled(chat_page.latest_run_id())
    expect(page.locator("#chat-list a")).to_have_text(["Trip to Lisbon"])
    expect(page.get_by_label("Message", exact=True)).to_be_focused()
    assert Chat.objects.get(pk=trip.pk).archived_at is None
