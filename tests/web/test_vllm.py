"""The chat page on the real engine: a vLLM worker serving the demo flagship model."""
import pytest

from tests.factories import TenantFactory, UserFactory
from tests.web.pages import ChatPage, saved_run

pytestmark = [pytest.mark.browser, pytest.mark.vllm, pytest.mark.django_db(transaction=True)]


def test_a_reply_from_vllm_streams_into_the_page_and_equals_the_saved_message(browser, live_url, vllm_pool):
    user = UserFactory(tenant=TenantFactory())
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    chat = ChatPage(context.new_page(), live_url)
    chat.sign_in(user.username)
    chat.page.get_by_label("Model").select_option(vllm_pool.name)
    chat.set_send_extra({"max_tokens": 64, "seed": 7})
    chat.send("Explain the for statement.")

    run_id = chat.latest_run_id()
    final = chat.wait_settled(run_id, timeout=180)
    run = saved_run(run_id)
    context.close()
    assert run.status == "completed" and run.pool.name == vllm_pool.name
    assert final["text"].encode() == run.assistant_message.content.encode()
    assert len(final["text"]) > 20 and final["tokenEvents"] >= 2  # streamed, not one lump
