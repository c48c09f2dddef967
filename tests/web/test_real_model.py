"""The web chat on the real flagship (SmolLM2-135M-Instruct on the session's vLLM
worker), in Chromium: a question typed in the page, the answer streamed and rendered.

With CHATSITE_SCREENSHOTS set it also writes docs/screenshots/real-model.png, the
README's picture of a real reply:
    CHATSITE_SCREENSHOTS=docs/screenshots .venv/bin/python -m pytest tests/web/test_real_model.py
"""
import os
from pathlib import Path

import pytest

from tests.factories import ChatFactory
from tests.web.pages import ChatPage, expect, saved_run

pytestmark = [pytest.mark.browser, pytest.mark.vllm, pytest.mark.django_db(transaction=True)]

QUESTION = "Write a Python function that reverses a list."


def test_the_real_model_answers_in_the_page(context, live_url, web_user, vllm_pool):
    vllm_pool.display_name = "Flagship"  # as make run names it (the test pool's own name is vllm-flagship)
    vllm_pool.save(update_fields=["display_name"])
    chat = ChatFactory(tenant=web_user.memberships.get().tenant, owner=web_user, pool=vllm_pool,
                       title="Reversing a list", temperature=0.0, max_tokens=200)
    page = ChatPage(context.new_page(), live_url)
    page.sign_in(web_user.username)
    page.open_chat(chat.pk)
    page.send(QUESTION)
    run_id = page.latest_run_id()
    final = page.wait_settled(run_id, timeout=120)
    assert final["status"] == "completed", final
    reply = page.article(run_id)
    expect(reply).not_to_have_attribute("aria-busy", "true")  # the reply is no longer streaming
    # greedy decoding on the real model: Python code, rendered as a highlighted block
    code = reply.locator("pre code")
    expect(code.first).to_contain_text("def ")
    assert "reverse" in final["text"].lower() or "[::-1]" in final["text"], final["text"]
    assert saved_run(run_id).assistant_message.content == final["text"]  # and saved before the test's rows go
    if os.environ.get("CHATSITE_SCREENSHOTS"):
        page.page.mouse.move(0, 0)
        page.page.screenshot(path=str(Path(os.environ["CHATSITE_SCREENSHOTS"]) / "real-model.png"))
    page.page.close()  # nothing of the page (its live stream, its figures' poll) reads while the rows are flushed
