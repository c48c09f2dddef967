"""Regenerate, edit and continue in the browser: versions ‹ i / n › that switch the
shown path, and what the model reads next follows the chosen one."""
import pytest

from chatsite.chats.models import Chat
from chatsite.runs.models import GenerationRun
from tests.web.pages import ChatPage, expect, saved_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _reply_text(chat_page: ChatPage, run_id: int) -> str:
    return chat_page.reply(run_id)["text"]


def _rendered(chat_page: ChatPage, text: str) -> str:
    """The text as the page's markdown shows it (the model's words may hold `, ** or _)."""
    return chat_page.page.evaluate("""text => { const d = document.createElement('div');
        d.append(ChatUI.markdown.render(text)); document.body.append(d);
        const shown = d.innerText; d.remove(); return shown; }""", text)


def test_regenerate_keeps_versions_and_the_arrows_switch_the_path(chat_page: ChatPage):
    page = chat_page.page
    chat_page.set_send_extra({"max_tokens": 12, "ignore_eos": True})
    chat_page.send("Name a colour")
    first = chat_page.latest_run_id()
    chat_page.wait_settled(first)
    one = _reply_text(chat_page, first)

    chat_page.watch_busy()
    chat_page.article(first).get_by_role("button", name="Regenerate this reply").click()
    second = chat_page.wait_new_run(first)
    chat_page.wait_settled(second)
    assert chat_page.busy_seen() == [second]  # the new version streamed in (12 tokens: over before a look could catch it)
    expect(chat_page.article(second)).not_to_have_attribute("aria-busy", "true")
    two = _reply_text(chat_page, second)
    assert one != two  # another seed: another reply
    versions = chat_page.article(second).locator(".versions")
    expect(versions).to_have_text("‹2 / 2›")
    expect(chat_page.article(first)).to_have_count(0)  # one version shown at a time

    versions.get_by_role("button", name="Previous version").click()
    expect(chat_page.article(first).locator(".versions")).to_have_text("‹1 / 2›")
    # a plain word of the first version (its Markdown, like **bold**, is rendered, not shown)
    expect(chat_page.article(first).locator(".prose")).to_contain_text(next(w for w in one.split() if w.isalpha()))
    expect(page.locator("article.msg-assistant")).to_have_count(1)

    page.reload()  # the choice is saved with the chat
    expect(chat_page.article(first).locator(".versions")).to_have_text("‹1 / 2›")
    chat_page.send("Why that one?")
    third = chat_page.wait_new_run(second)
    snapshot = GenerationRun.objects.get(pk=third).prompt_snapshot
    assert [m["content"] for m in snapshot] == ["Name a colour", one, "Why that one?"]


def test_edit_a_sent_message_makes_a_branch_and_the_old_one_stays_reachable(chat_page: ChatPage):
    page = chat_page.page
    chat_page.set_send_extra({"max_tokens": 8, "ignore_eos": True})
    chat_page.send("Tell me about cats")
    first = chat_page.latest_run_id()
    chat_page.wait_settled(first)

    bubble = page.locator(".msg-user").last
    bubble.hover()
    bubble.get_by_role("button", name="Edit this message").click()
    box = page.get_by_label("Edit your message")
    expect(box).to_be_focused()
    box.fill("Tell me about dogs")
    box.press("Enter")
    second = chat_page.wait_new_run(first)
    chat_page.wait_settled(second)
    expect(page.locator(".msg-user .bubble")).to_have_text(["Tell me about dogs"])
    user_versions = page.locator(".msg-user .versions")
    expect(user_versions).to_have_text("‹2 / 2›")
    assert saved_run(second).user_message.content == "Tell me about dogs"

    user_versions.get_by_role("button", name="Previous version").click()
    expect(page.locator(".msg-user .bubble")).to_have_text(["Tell me about cats"])
    expect(chat_page.article(first)).to_be_visible()  # the old branch, with its reply
    expect(chat_page.article(second)).to_have_count(0)


def test_continue_a_reply_cut_at_the_length_limit_appends_to_it(chat_page: ChatPage):
    page = chat_page.page
    chat_page.set_send_extra({"max_tokens": 6, "ignore_eos": True})
    chat_page.send("Count for me")
    first = chat_page.latest_run_id()
    chat_page.wait_settled(first)
    article = chat_page.article(first)
    expect(article.locator(".badge")).to_have_text("Reached the length limit")
    before = _reply_text(chat_page, first)

    # The continue's own request, awaited: a failure then says whether it was sent and what it was answered.
    with page.expect_response(lambda r: r.url.endswith("/continue") and r.request.method == "POST",
                              timeout=30_000) as answered:
        article.get_by_role("button", name="Continue this reply").click()
    assert answered.value.ok, f"continue answered {answered.value.status}: {answered.value.text()}"
    second = chat_page.wait_new_run(first, timeout=30)
    chat_page.wait_settled(second)
    run = saved_run(second)
    final = chat_page.reply(second)
    assert run.assistant_message.content == final["text"] and final["text"].startswith(before)
    assert len(final["text"]) > len(before) and run.completion_tokens == 6
    expect(page.locator("article.msg-assistant")).to_have_count(1)  # the same reply grew
    expect(chat_page.article(second).locator(".versions")).to_have_count(0)  # not a new version
    page.reload()
    expect(page.locator("article.msg-assistant .prose")).to_have_text(_rendered(chat_page, final["text"]))
    assert Chat.objects.get(pk=run.chat_id).current_leaf_id == run.assistant_message_id
