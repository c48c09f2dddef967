"""Browser tests: Playwright drives Debian's Chromium against the live daphne and
the fake-engine Celery workers (tests/conftest.py), with real Postgres and Redis.

Playwright's sync API runs an asyncio loop in this thread while it is started, so
Django's ORM in the same test would raise SynchronousOnlyOperation; the tests here
set DJANGO_ALLOW_ASYNC_UNSAFE for as long as the browser runs. The live servers are
started before that, so they never inherit the variable."""
import os

import pytest
from playwright.sync_api import sync_playwright

from tests.factories import PoolFactory, TenantFactory, UserFactory
from tests.web.pages import CHROMIUM, CHROMIUM_ARGS, ChatPage


@pytest.fixture(scope="package")
def browser(live_url):
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def pools(db):
    """The pools the fake workers serve, and one that no worker serves."""
    return {name: PoolFactory(name=name, display_name=title, max_output_tokens=600)
            for name, title in [("flagship", "Flagship"), ("small", "Small"), ("ghost", "Ghost")]}


@pytest.fixture
def web_user(pools):
    return UserFactory(tenant=TenantFactory())


@pytest.fixture
def context(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    yield ctx
    ctx.close()


@pytest.fixture
def chat_page(context, live_url, web_user, fake_workers) -> ChatPage:
    """A signed-in page on a new chat, with the fake-engine workers serving."""
    page = ChatPage(context.new_page(), live_url)
    page.sign_in_as(web_user)
    return page


# The browser sizes layout tests run at: a laptop, and a phone (touch, no hover).
SIZES = {"desktop": {"viewport": {"width": 1280, "height": 800}},
         "phone": {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True}}


@pytest.fixture(params=list(SIZES))
def sized_page(request, browser, live_url, web_user, fake_workers) -> ChatPage:
    """chat_page at each of SIZES."""
    ctx = browser.new_context(**SIZES[request.param])
    page = ChatPage(ctx.new_page(), live_url)
    page.sign_in_as(web_user)
    yield page
    ctx.close()
