"""Editing a queued message that starts or leaves the queue meanwhile: the save is
refused (409), and the queue panel shows the queue as it is again instead of freezing
on the open field."""
import pytest

from chatsite.chats.models import QueuedMessage
from chatsite.runs.services.queued.edit import queued_withdraw
from tests.factories import ChatFactory, queueing_pool
from tests.web.pages import ChatPage, expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_save_refused_because_the_message_left_the_queue_frees_the_panel(chat_page: ChatPage, web_user, pools):
    # The reply the queue waits for is in a pool no worker serves: it is in progress throughout.
    chat = ChatFactory(tenant=web_user.memberships.get().tenant, owner=web_user, pool=queueing_pool("ghost"))
    chat_page.open_chat(chat.pk)
    chat_page.page.wait_for_function("() => window.ChatUI && ChatUI.liveStream")
    chat_page.send("Tell me a long story")
    chat_page.latest_run_id()
    chat_page.send("first in line")
    chat_page.send("second in line")
    queue = chat_page.page.locator("#queue")
    expect(queue.locator(".queued-text")).to_have_text(["first in line", "second in line"], timeout=20_000)
    queue.locator(".queued").first.get_by_role("button", name="Edit").click()
    first, second = QueuedMessage.objects.order_by("id")
    queued_withdraw(tenant=chat.tenant, user=web_user, chat_id=chat.pk, queued_id=first.pk)  # another window
    queue.get_by_label("Edit the queued message").fill("too late")
    queue.get_by_role("button", name="Save").click()  # 409: it left the queue
    expect(queue.locator(".queued-text")).to_have_text(["second in line"], timeout=10_000)
    expect(queue.locator(".queued.editing")).to_have_count(0)
    queued_withdraw(tenant=chat.tenant, user=web_user, chat_id=chat.pk, queued_id=second.pk)
    expect(queue).to_be_hidden(timeout=10_000)  # and it follows the queue's changes again
