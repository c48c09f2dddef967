"""A model that queues while it scales from zero: the reply says it waits for a worker."""
import pytest

from chatsite.runs.models import GenerationRun
from tests.factories import ChatFactory, queueing_pool
from tests.web.pages import ChatPage, expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reply_on_a_cold_pool_says_it_waits_for_a_worker(chat_page: ChatPage, web_user):
    cold = queueing_pool("cold", display_name="Cold")
    chat = ChatFactory(tenant=web_user.memberships.get().tenant, owner=web_user, pool=cold, title="Cold start")
    chat_page.open_chat(chat.pk)
    chat_page.send("Anyone there?")
    run_id = chat_page.latest_run_id()
    expect(chat_page.article(run_id)).to_contain_text("Waiting for a worker of cold to start…")
    assert GenerationRun.objects.get(pk=run_id).status == "queued"
    chat_page.page.reload()  # the server-rendered page says so too
    expect(chat_page.article(run_id)).to_contain_text("Waiting for a worker of cold to start…")
