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


def test_continue_on_vllm_carries_on_from_the_text_so_far(browser, live_url, vllm_pool):
    """The worker hands the reply's text to prompt assembly as the start of the
    answer: the real model continues it, and the saved message is both parts."""
    user = UserFactory(tenant=TenantFactory())
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    chat = ChatPage(context.new_page(), live_url)
    chat.sign_in(user.username)
    chat.page.get_by_label("Model").select_option(vllm_pool.name)
    chat.set_send_extra({"max_tokens": 8, "seed": 7, "ignore_eos": True})
    chat.send("Explain the for statement.")
    first = chat.latest_run_id()
    chat.wait_settled(first, timeout=180)
    before = saved_run(first).assistant_message.content
    chat.article(first).get_by_role("button", name="Continue this reply").click()
    second = chat.wait_new_run(first, timeout=30)  # the page waits on the engine-loaded machine too
    final = chat.wait_settled(second, timeout=180)
    run = saved_run(second)
    context.close()
    assert run.status == "completed" and run.completion_tokens == 8
    assert run.assistant_message.content == final["text"] and final["text"].startswith(before)
    assert len(final["text"]) > len(before)
