"""Finding and keeping chats: search, older messages and chats on scroll, a
chat's settings, export, Markdown as people expect it, and the OpenAI-compatible
API's chats kept out of the sidebar."""
import json

import httpx
import pytest

from chatsite.pools.models import ModelPool
from chatsite.runs.models import GenerationRun
from chatsite.tenancy.services import api_key_create
from tests.factories import ChatFactory
from tests.web.pages import ChatPage, expect
from tests.web.seed import seed_chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RICH = """Here is a comparison:

| Method | Memory |
|---|---|
| `for line in f` | O(1) |
| `f.readlines()` | O(n) |

```python
def count(path):
    return sum(1 for _ in open(path))
```

The mean is $\\bar x = \\frac{1}{n}\\sum x_i$."""


def test_search_finds_chats_by_title_and_message_text(chat_page: ChatPage, web_user):
    pool = ModelPool.objects.get(name="flagship")
    seed_chat(user=web_user, pool=pool, title="Trip planning",
              turns=[("Which museums in Lisbon open on Mondays?", "Several do, for example the Gulbenkian.")])
    seed_chat(user=web_user, pool=pool, title="Groceries", turns=[("Milk and eggs", "Noted.")])
    page = chat_page.page
    page.reload()
    search = page.get_by_label("Search chats")
    search.fill("gulbenk")  # a word of a reply, typed halfway
    results = page.locator("[data-search-result]")
    expect(results).to_have_count(1)
    expect(results.first.locator(".search-title")).to_have_text("Trip planning")
    expect(results.first.locator("mark")).to_have_text("Gulbenkian")
    search.fill("groceries")
    expect(results).to_have_count(1)
    expect(results.first).to_contain_text("Groceries")
    search.fill("nothing-like-this")
    expect(page.locator("#search-results")).to_contain_text("No chats match")
    search.press("Escape")
    expect(page.locator("#chat-list")).to_be_visible()


def test_older_messages_and_chats_load_on_scroll(chat_page: ChatPage, web_user):
    pool = ModelPool.objects.get(name="flagship")
    tenant = web_user.memberships.get().tenant
    for i in range(55):  # more than the sidebar's first page (50)
        ChatFactory(tenant=tenant, owner=web_user, pool=pool, title=f"Old chat {i:02d}")
    long = seed_chat(user=web_user, pool=pool, title="A long one",
                     turns=[(f"Question {i}", f"Answer number {i}.") for i in range(30)])  # 60 messages
    page = chat_page.page
    chat_page.open_chat(long.pk)
    expect(page.locator(".msg")).to_have_count(40)  # the newest page of the path
    expect(page.locator(".msg-user .bubble").first).to_have_text("Question 10")
    page.locator("#scroller").evaluate("s => { s.scrollTop = 0; }")
    expect(page.locator(".msg")).to_have_count(60)
    expect(page.locator(".msg-user .bubble").first).to_have_text("Question 0")

    links = page.locator("#chat-list a")
    expect(links).to_have_count(50)
    page.locator("#chat-list").evaluate("l => { l.scrollTop = l.scrollHeight; }")
    expect(links).to_have_count(56)
    expect(links.last).to_have_text("Old chat 00")


def test_chat_settings_are_saved_with_the_chat_and_used_by_its_runs(chat_page: ChatPage):
    page = chat_page.page
    page.get_by_role("button", name="Chat settings").click()  # before the chat exists
    page.get_by_label("System prompt").fill("Answer like a pirate.")
    page.get_by_label("Temperature").fill("0.3")
    page.get_by_label("Reply length (tokens)").fill("9")
    page.get_by_role("button", name="Save").click()
    chat_page.send("Hello")
    first = chat_page.latest_run_id()
    chat_page.wait_settled(first)
    run = GenerationRun.objects.select_related("chat").get(pk=first)
    assert run.max_tokens == 9 and run.sampling["temperature"] == 0.3
    assert run.prompt_snapshot[0] == {"role": "system", "content": "Answer like a pirate."}
    assert (run.chat.system_prompt, run.chat.temperature, run.chat.max_tokens) == ("Answer like a pirate.", 0.3, 9)

    page.reload()
    page.get_by_role("button", name="Chat settings").click()
    expect(page.get_by_label("System prompt")).to_have_value("Answer like a pirate.")
    page.get_by_label("Reply length (tokens)").fill("100000")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#settings-error")).to_contain_text("max_tokens must be an integer from 1 to 600")
    page.get_by_label("Reply length (tokens)").fill("")
    page.get_by_label("Temperature").fill("")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("dialog", name="Chat settings")).to_be_hidden()
    run.chat.refresh_from_db()
    assert (run.chat.temperature, run.chat.max_tokens) == (None, None)


def test_export_a_chat_as_markdown_and_as_json(chat_page: ChatPage, web_user):
    chat = seed_chat(user=web_user, pool=ModelPool.objects.get(name="flagship"), title="Files",
                     turns=[("How do I count lines?", RICH)])
    page = chat_page.page
    chat_page.open_chat(chat.pk)
    page.get_by_label("Chat options").click()
    with page.expect_download() as md:
        page.get_by_role("link", name="Export as Markdown").click()
    text = open(md.value.path(), encoding="utf-8").read()
    assert md.value.suggested_filename == f"files-{chat.pk}.md"
    assert text.startswith("# Files") and "## You\n\nHow do I count lines?" in text and RICH in text
    page.get_by_label("Chat options").click()
    with page.expect_download() as js:
        page.get_by_role("link", name="Export as JSON").click()
    doc = json.loads(open(js.value.path(), encoding="utf-8").read())
    assert [m["role"] for m in doc["messages"]] == ["user", "assistant"] and doc["chat"]["title"] == "Files"


def test_markdown_tables_highlighted_code_and_math_in_a_reply(chat_page: ChatPage, web_user, context):
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    chat = seed_chat(user=web_user, pool=ModelPool.objects.get(name="flagship"), turns=[("Show me", RICH)])
    page = chat_page.page
    chat_page.open_chat(chat.pk)
    reply = page.locator("article.msg-assistant")
    expect(reply.locator("table th")).to_have_text(["Method", "Memory"])
    expect(reply.locator("table td code").first).to_have_text("for line in f")
    expect(reply.locator(".code-block .hljs-keyword").first).to_have_text("def")  # coloured by highlight.js
    expect(reply.locator("math")).to_have_count(1)  # KaTeX, as MathML
    reply.get_by_role("button", name="Copy python code").click()
    assert page.evaluate("() => navigator.clipboard.readText()") == "def count(path):\n    return sum(1 for _ in open(path))"


def test_openai_api_chats_stay_out_of_the_sidebar(chat_page: ChatPage, web_user, live_url):
    tenant = web_user.memberships.get().tenant
    _, secret = api_key_create(user=web_user, tenant=tenant, name="script")
    resp = httpx.post(f"{live_url}/v1/chat/completions", headers={"Authorization": f"Bearer {secret}"},
                      json={"model": "flagship", "messages": [{"role": "user", "content": "From a script"}],
                            "max_tokens": 5}, timeout=60)
    assert resp.status_code == 200, resp.text
    run_id = int(resp.headers["X-Run-Id"])
    page = chat_page.page
    page.reload()
    expect(page.locator("#chat-list-empty")).to_be_visible()  # nothing listed
    assert chat_page.api("GET", f"/api/runs/{run_id}/")["data"]["status"] == "completed"  # still under /api
    page.get_by_label("Search chats").fill("script")
    expect(page.locator("#search-results")).to_contain_text("No chats match")
