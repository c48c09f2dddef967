"""At phone size (390x844, touch): the picker shows each model's whole name, the same name
each reply's footer shows; the chat's title stays in the top bar; the chat menu does not
open the keyboard over its own items; a message's Edit is there without hovering."""
import pytest

from chatsite.pools.demo import DEMO_POOLS
from chatsite.pools.models import ModelPool
from tests.factories import ChatFactory
from tests.web.conftest import SIZES
from tests.web.pages import ChatPage, expect
from tests.web.seed import seed_chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def phone(browser, live_url, web_user, fake_workers):
    for name, spec in DEMO_POOLS.items():  # the names `make run` shows
        ModelPool.objects.filter(name=name).update(display_name=spec["display_name"])
    ctx = browser.new_context(**SIZES["phone"])
    chat = ChatPage(ctx.new_page(), live_url)
    chat.sign_in(web_user.username)
    yield chat
    ctx.close()


# The select's text against the room it has: wider text is cut with an ellipsis.
SHOWN_WHOLE = """() => { const s = document.getElementById('model-select'), cs = getComputedStyle(s);
    const ctx = document.createElement('canvas').getContext('2d');
    ctx.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
    const room = s.getBoundingClientRect().width - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    return {text: s.selectedOptions[0].textContent, fits: ctx.measureText(s.selectedOptions[0].textContent).width <= room}; }"""


def test_the_picker_shows_each_models_whole_name_as_the_footer_does(phone: ChatPage):
    page = phone.page
    shown = {}
    for name in ("flagship", "small"):
        page.get_by_label("Model").select_option(name)
        got = page.evaluate(SHOWN_WHOLE)
        assert got["fits"], got
        shown[name] = got["text"]
    assert shown == {name: spec["display_name"] for name, spec in DEMO_POOLS.items()}
    assert shown["flagship"] != shown["small"]

    phone.send("Hi from my phone")
    run_id = phone.latest_run_id()
    phone.wait_settled(run_id)
    model = phone.article(run_id).locator(".stat-model")
    expect(model).to_be_visible()
    expect(model).to_have_text(DEMO_POOLS["small"]["display_name"])


def test_the_title_stays_in_the_top_bar_and_the_menu_leaves_the_keyboard_closed(phone: ChatPage, web_user):
    chat = ChatFactory(tenant=web_user.memberships.get().tenant, owner=web_user,
                       pool=ModelPool.objects.get(name="flagship"), title="Packing list for a week in Lisbon")
    page = phone.page
    phone.open_chat(chat.pk)
    title = page.locator("#chat-title")
    expect(title).to_be_visible()
    expect(title).to_have_text("Packing list for a week in Lisbon")
    box = title.bounding_box()
    assert box["y"] < 56 and box["x"] >= 0 and box["x"] + box["width"] <= 390

    page.get_by_label("Chat options").click()
    expect(page.get_by_label("Rename chat")).not_to_be_focused()
    for item in (page.get_by_role("link", name="Export as Markdown"), page.get_by_role("button", name="Delete chat")):
        expect(item).to_be_in_viewport()
    page.get_by_label("Rename chat").fill("Lisbon, a week")  # renaming still works when asked for
    page.get_by_label("Rename chat").press("Enter")
    expect(title).to_have_text("Lisbon, a week")


def test_edit_is_shown_without_hovering(phone: ChatPage, web_user):
    chat = seed_chat(user=web_user, pool=ModelPool.objects.get(name="flagship"))
    page = phone.page
    phone.open_chat(chat.pk)
    page.wait_for_selector(".stats")
    edit = page.locator(".msg-user").get_by_role("button", name="Edit this message")
    expect(edit).to_be_visible()
    assert edit.evaluate("el => getComputedStyle(el.closest('.msg-foot')).opacity") == "1"
    edit.tap()
    expect(page.get_by_label("Edit your message")).to_be_focused()
