"""Thumbs up or down on a reply, with an optional comment: saved with its run, shown again
after a reload, changed or withdrawn with the same buttons."""
import pytest

from chatsite.runs.models import ReplyFeedback
from tests.web.pages import ChatPage, expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_rate_a_reply_comment_change_and_withdraw(sized_page: ChatPage):
    page = sized_page.page
    sized_page.send("What is the capital of France?")
    run_id = sized_page.latest_run_id()
    sized_page.wait_settled(run_id)
    reply = sized_page.article(run_id)
    bad, good = reply.get_by_role("button", name="Bad reply"), reply.get_by_role("button", name="Good reply")
    expect(bad).to_have_attribute("aria-pressed", "false")

    bad.click()
    expect(bad).to_have_attribute("aria-pressed", "true")
    comment = reply.get_by_label("Thanks. What was wrong with it? (optional)")
    comment.fill("It named the wrong city.")
    reply.get_by_role("button", name="Send feedback").click()
    expect(page.get_by_role("status").filter(has_text="Thanks for the feedback")).to_be_visible()
    expect(comment).to_have_count(0)
    saved = ReplyFeedback.objects.get(run_id=run_id)
    assert (saved.rating, saved.comment) == ("down", "It named the wrong city.")

    page.reload()
    reply = sized_page.article(run_id)
    expect(reply.get_by_role("button", name="Bad reply")).to_have_attribute("aria-pressed", "true")
    reply.get_by_role("button", name="Good reply").click()
    expect(reply.get_by_role("button", name="Good reply")).to_have_attribute("aria-pressed", "true")
    expect(reply.get_by_role("button", name="Bad reply")).to_have_attribute("aria-pressed", "false")
    reply.get_by_role("button", name="Skip").click()
    assert ReplyFeedback.objects.get(run_id=run_id).rating == "up"

    reply.get_by_role("button", name="Good reply").click()  # pressed again: withdrawn
    expect(reply.get_by_role("button", name="Good reply")).to_have_attribute("aria-pressed", "false")
    expect(reply.locator(".feedback-form")).to_have_count(0)
    assert not ReplyFeedback.objects.filter(run_id=run_id).exists()
