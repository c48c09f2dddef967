"""The settings page: theme, default instructions for new chats, the person's own API keys
(made with a name, shown once, revoked at once), usage against the team's budget, and
archived chats to restore."""
import httpx
import pytest

from chatsite.chats.models import Chat
from chatsite.pools.models import ModelPool
from chatsite.quotas.models import TenantQuota
from chatsite.tenancy.models import ApiKey
from tests.factories import ChatFactory
from tests.web.pages import ChatPage, expect, saved_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
DARK_BG, LIGHT_BG = "rgb(21, 22, 26)", "rgb(255, 255, 255)"


def _background(page) -> str:
    return page.evaluate("() => getComputedStyle(document.body).backgroundColor")


def test_theme_and_default_instructions_apply_to_every_page_and_new_chats(chat_page: ChatPage):
    page = chat_page.page
    page.get_by_role("link", name="Settings").click()
    expect(page.get_by_role("heading", name="Settings", exact=True)).to_be_visible()
    assert _background(page) == LIGHT_BG  # the system's (light, in this browser)
    page.get_by_label("Dark").check()
    page.get_by_label("What every new chat tells the model first").fill("Answer in French.")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("Settings saved.")
    assert _background(page) == DARK_BG
    assert page.locator("html").get_attribute("data-theme") == "dark"

    page.get_by_role("link", name="Back to your chats").click()
    assert _background(page) == DARK_BG  # the chat page too
    page.get_by_role("button", name="Chat settings").click()
    expect(page.get_by_label("System prompt")).to_have_value("Answer in French.")
    page.get_by_role("button", name="Cancel").click()
    chat_page.send("Bonjour")
    run = saved_run(chat_page.latest_run_id())
    assert run.chat.system_prompt == "Answer in French."
    assert run.prompt_snapshot[0] == {"role": "system", "content": "Answer in French."}

    page.goto(chat_page.live_url + "/settings/")
    page.get_by_label("Same as the system").check()
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("Settings saved.")
    assert page.locator("html").get_attribute("data-theme") is None and _background(page) == LIGHT_BG


def test_api_keys_are_shown_once_listed_and_revoked_at_once(chat_page: ChatPage, web_user):
    page, live_url = chat_page.page, chat_page.live_url
    page.goto(live_url + "/settings/")
    page.get_by_label("Name").fill("nightly batch")
    page.get_by_role("button", name="Create key").click()
    secret = page.locator("#key-secret-value")
    expect(secret).to_contain_text("csk_")
    key = secret.text_content()
    auth = {"Authorization": f"Bearer {key}"}
    assert httpx.get(live_url + "/api/chats/", headers=auth).status_code == 200
    row = page.locator("#keys tbody tr").first
    expect(row).to_contain_text("nightly batch")

    page.reload()  # shown once
    expect(page.locator("#key-secret")).to_be_hidden()
    assert key not in page.content()
    row = page.locator("#keys tbody tr").first
    expect(row).to_contain_text("ago")  # last used: just now
    revoke = row.get_by_role("button", name="Revoke nightly batch")
    revoke.click()
    expect(revoke).to_have_text("Really revoke?")
    revoke.click()
    expect(row).to_contain_text("Revoked just now")
    assert httpx.get(live_url + "/api/chats/", headers=auth).status_code == 401  # at once
    assert ApiKey.objects.get(user=web_user).revoked_at is not None


def test_usage_against_the_budget_and_archived_chats_to_restore(chat_page: ChatPage, web_user):
    tenant = web_user.memberships.get().tenant
    TenantQuota.objects.create(tenant=tenant, token_budget=100_000, period="month")
    page = chat_page.page
    chat_page.send("Count my tokens")
    run = saved_run(chat_page.latest_run_id())
    used = run.prompt_tokens + run.completion_tokens
    archived = ChatFactory(tenant=tenant, owner=web_user, pool=ModelPool.objects.get(name="flagship"),
                           title="Old plans")
    Chat.objects.filter(pk=archived.pk).update(archived_at=run.finished_at)

    page.goto(chat_page.live_url + "/settings/")
    expect(page.locator("#usage-mine")).to_have_text(str(used))
    expect(page.locator("#usage-budget")).to_contain_text(f"{used} of 100000 tokens used this month")
    item = page.locator("[data-archived-chat]")
    expect(item).to_contain_text("Old plans")
    item.get_by_role("button", name="Restore Old plans").click()
    expect(item).to_have_count(0)
    assert Chat.objects.get(pk=archived.pk).archived_at is None
    page.get_by_role("link", name="Back to your chats").click()
    expect(page.locator("#chat-list")).to_contain_text("Old plans")


def test_the_settings_page_fits_a_phone(browser, live_url, web_user, fake_workers):
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True)
    chat = ChatPage(ctx.new_page(), live_url)
    chat.sign_in(web_user.username)
    chat.page.goto(live_url + "/settings/")
    expect(chat.page.get_by_role("button", name="Create key")).to_be_visible()
    assert chat.page.evaluate("() => document.documentElement.scrollWidth") <= 390
    ctx.close()
