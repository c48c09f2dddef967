"""The admin for operators, in the browser: the operations page with live workers, and
Cancel on a run that is still generating."""
import pytest
from django.contrib.auth import get_user_model

from chatsite.runs.models import GenerationRun
from tests.factories import PASSWORD
from tests.web.pages import LONG_REPLY, ChatPage, expect, saved_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def operator_browser(browser):
    """The operator's own browser (not the chat's person's: signing in there would sign them out)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    yield ctx
    ctx.close()


def test_an_operator_reads_the_figures_and_cancels_a_run(chat_page: ChatPage, operator_browser, web_user):
    chat_page.send("A short one")
    chat_page.wait_settled(chat_page.latest_run_id())
    # The operator signs in before the long reply starts: it lasts ~5 s, and on a loaded box the
    # sign-in and the pages after it took longer (the reply had ended before Cancel).
    get_user_model().objects.create_superuser("operator", "ops@example.com", PASSWORD)
    admin = operator_browser.new_page()
    admin.goto(chat_page.live_url + "/admin/login/")
    admin.get_by_label("Username").fill("operator")
    admin.get_by_label("Password").fill(PASSWORD)
    admin.get_by_role("button", name="Log in").click()
    operations = admin.get_by_role("link", name="Operations")
    expect(operations).to_be_visible()

    chat_page.set_send_extra(LONG_REPLY)
    long_run = chat_page.send_for_new_run("And a long one")
    chat_page.wait_tokens(long_run, 3)
    operations.click()
    flagship = admin.locator("section", has=admin.get_by_role("heading", name="Flagship"))
    expect(flagship.locator('[data-figure="workers"]')).to_have_text("1")
    expect(flagship.locator('[data-status="completed"]')).to_have_text("1")
    expect(flagship.locator('[data-status="running"]')).to_have_text("1")
    expect(flagship.locator('[data-figure="ttft"]')).to_contain_text("p95")
    expect(flagship.get_by_role("cell", name="ready")).to_be_visible()

    admin.goto(chat_page.live_url + "/admin/runs/generationrun/?status__exact=running")
    admin.locator(f'input[name="_selected_action"][value="{long_run}"]').check()
    admin.get_by_label("Action:").select_option(label="Cancel the selected runs")
    admin.get_by_role("button", name="Go").click()
    expect(admin.locator(".messagelist")).to_contain_text("Asked 1 run(s) to stop")
    assert saved_run(long_run).status == GenerationRun.Status.CANCELLED
    # The person sees it stop: the label comes with the saved run (its stream's end alone does not
    # say whether a "send now" stopped it), fetched just after.
    expect(chat_page.article(long_run).locator(".badge")).to_have_text("Stopped")
