"""The screenshots in docs/screenshots/, taken from the live stack.

Skipped unless CHATSITE_SCREENSHOTS names the folder to write them to:
    CHATSITE_SCREENSHOTS=docs/screenshots .venv/bin/python -m pytest tests/web/test_screenshots.py
"""
import json
import os
import re
from pathlib import Path

import pytest

from django.utils import timezone

from chatsite.chats.models import Chat
from chatsite.pools.demo import DEMO_POOLS
from chatsite.pools.models import ModelPool
from tests.web.pages import LONG_REPLY, ChatPage, expect
from tests.web.seed import seed_chat

OUT = os.environ.get("CHATSITE_SCREENSHOTS")
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(not OUT, reason="set CHATSITE_SCREENSHOTS=docs/screenshots to take them")]


def _shot(page, name: str, full_page: bool = False) -> None:
    page.mouse.move(0, 0)
    page.wait_for_timeout(150)
    page.screenshot(path=str(Path(OUT) / f"{name}.png"), full_page=full_page)


def _signed_in(browser, live_url, user, scheme="light", **viewport) -> ChatPage:
    ctx = browser.new_context(viewport=viewport or {"width": 1280, "height": 800}, color_scheme=scheme,
                              device_scale_factor=1, is_mobile=viewport.get("width", 1280) < 500,
                              has_touch=viewport.get("width", 1280) < 500)
    chat = ChatPage(ctx.new_page(), live_url)
    chat.sign_in(user.username)
    return chat


def test_take_screenshots(browser, live_url, web_user, fake_workers):
    Path(OUT).mkdir(parents=True, exist_ok=True)
    for name, spec in DEMO_POOLS.items():  # the names `make run` shows
        ModelPool.objects.filter(name=name).update(display_name=spec["display_name"])
    pool = ModelPool.objects.get(name="flagship")
    pinned = seed_chat(user=web_user, pool=pool, title="Sorting a dict by value",
                       turns=[("How do I sort a dict by its values?", "Use `sorted(d.items(), key=lambda kv: kv[1])`.")])
    Chat.objects.filter(pk=pinned.pk).update(pinned_at=timezone.now())
    done = seed_chat(user=web_user, pool=pool)

    login = browser.new_page(viewport={"width": 1280, "height": 800})
    login.goto(live_url + "/login/")
    _shot(login, "login")
    login.close()

    chat = _signed_in(browser, live_url, web_user)
    _shot(chat.page, "new-chat")

    chat.open_chat(done.pk)
    chat.page.wait_for_selector(".stats")
    _shot(chat.page, "finished-reply")
    chat.page.get_by_role("button", name="Bad reply").click()
    chat.page.get_by_label("Thanks. What was wrong with it? (optional)").fill("The second example skips the encoding.")
    _shot(chat.page, "feedback")
    chat.page.get_by_role("button", name="Skip").click()

    reply = chat.page.locator("article.msg-assistant").last
    first = int(reply.get_attribute("data-run-id"))
    reply.get_by_role("button", name="Regenerate this reply").click()
    chat.wait_settled(chat.wait_new_run(first))
    chat.page.get_by_role("button", name="Previous version").last.click()
    expect(chat.page.locator("article.msg-assistant .versions").last).to_have_text("‹1 / 2›")
    _shot(chat.page, "versions")

    chat.page.get_by_label("Search chats").fill("dict")
    expect(chat.page.locator("[data-search-result]")).to_have_count(1)
    _shot(chat.page, "search")
    chat.page.get_by_label("Search chats").fill("")

    chat.page.get_by_role("button", name="Chat settings").click()
    chat.page.get_by_label("System prompt").fill("You are a patient Python tutor. Answer with short examples.")
    chat.page.get_by_label("Temperature").fill("0.4")
    _shot(chat.page, "settings")
    chat.page.get_by_role("button", name="Cancel").click()

    box = chat.page.get_by_label("Message", exact=True)
    box.fill("Summarise this log: " + "GET /api/chats/ 200 12ms\n" * 1400)
    box.press("Enter")
    _shot(chat.page, "length-limit")
    box.fill("")

    chat.set_send_extra(LONG_REPLY)
    run_id = chat.send_for_new_run("And how do I write lines back to a file?")
    chat.wait_tokens(run_id, 45)
    _shot(chat.page, "streaming")
    chat.page.get_by_role("button", name="Stop generating").click()
    chat.wait_settled(run_id)

    chat.page.route(re.compile(r".*/api/chats/\d+/messages/$"), lambda route: route.fulfill(
        status=503, headers={"Retry-After": "8"}, content_type="application/json",
        body=json.dumps({"error": {"code": "overloaded", "message": "model 'flagship' is busy"}})))
    chat.send("Can you show an example with writelines?")
    expect(chat.notice()).to_contain_text("The server is busy")
    _shot(chat.page, "error-retry")
    chat.page.goto(live_url + "/c/987654321/")
    _shot(chat.page, "not-found")
    chat.page.goto(live_url + "/settings/")
    chat.page.get_by_label("Name").fill("nightly batch")
    chat.page.get_by_role("button", name="Create key").click()
    expect(chat.page.locator("#key-secret-value")).to_contain_text("csk_")
    _shot(chat.page, "user-settings", full_page=True)
    chat.page.context.close()

    web_user.is_staff = web_user.is_superuser = True
    web_user.save(update_fields=["is_staff", "is_superuser"])
    ops = _signed_in(browser, live_url, web_user)
    ops.page.goto(live_url + "/admin/operations/")
    _shot(ops.page, "operations", full_page=True)
    ops.page.context.close()

    dark = _signed_in(browser, live_url, web_user, scheme="dark")
    dark.open_chat(done.pk)
    dark.page.wait_for_selector(".stats")
    _shot(dark.page, "finished-reply-dark")
    dark.page.context.close()

    phone = _signed_in(browser, live_url, web_user, width=390, height=844)
    phone.open_chat(done.pk)
    phone.page.wait_for_selector(".stats")
    _shot(phone.page, "phone")
    phone.page.get_by_label("Chat options").click()
    _shot(phone.page, "phone-menu")
    phone.page.keyboard.press("Escape")
    phone.page.get_by_role("button", name="Show the chat list").click()
    phone.page.wait_for_timeout(300)
    _shot(phone.page, "phone-chat-list")
    phone.page.context.close()
