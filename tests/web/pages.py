"""What a person does on the chat page, as steps the browser tests share."""
import time

from playwright.sync_api import Page, expect

from chatsite.runs.models import GenerationRun
from tests.factories import PASSWORD

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]
TERMINAL = ("completed", "failed", "cancelled")

# A 5-second reply from the fake engine (500 tokens at ~10 ms), for stop / reload / offline.
LONG_REPLY = {"max_tokens": 500, "ignore_eos": True}


class ChatPage:
    def __init__(self, page: Page, live_url: str):
        self.page = page
        self.live_url = live_url

    def sign_in(self, username: str, password: str = PASSWORD) -> None:
        """Through the sign-in form, as a person does."""
        self.page.goto(self.live_url + "/login/")
        self.page.get_by_label("Username").fill(username)
        self.page.get_by_label("Password").fill(password)
        self.page.get_by_role("button", name="Sign in").click()
        self.page.wait_for_url(self.live_url + "/")

    def sign_in_as(self, user) -> None:
        """Signed in as `user` by a session of Django's own making (its test client's force_login),
        without the form's two page loads: the tests about other pages start here."""
        from django.conf import settings
        from django.test import Client

        client = Client()
        client.force_login(user)
        session = client.cookies[settings.SESSION_COOKIE_NAME].value
        self.page.context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": self.live_url}])
        self.page.goto(self.live_url + "/")

    def open_chat(self, chat_id: int) -> None:
        self.page.goto(f"{self.live_url}/c/{chat_id}/")

    def set_send_extra(self, extra: dict | None) -> None:
        """Sampling the UI adds to each message it posts (tests ask for long replies)."""
        self.page.evaluate("extra => { ChatUI.sendExtra = extra; }", extra)

    def send(self, text: str) -> None:
        box = self.page.get_by_label("Message", exact=True)
        box.fill(text)
        box.press("Enter")

    def send_for_new_run(self, text: str, timeout: float = 10) -> int:
        """Send `text` in a chat that has replies already; the new reply's run id. The
        latest id is read before sending: the new run may be on the page by the time
        send returns."""
        known = self.latest_run_id()
        self.send(text)
        return self.wait_new_run(known, timeout)

    def latest_run_id(self, timeout: float = 10) -> int:
        self.page.wait_for_function("() => Object.keys(ChatUI.replies).length > 0", timeout=timeout * 1000)
        return self.page.evaluate("() => Math.max(...Object.keys(ChatUI.replies).map(Number))")

    def wait_new_run(self, known: int = 0, timeout: float = 10) -> int:
        self.page.wait_for_function("known => Object.keys(ChatUI.replies).some(k => Number(k) > known)", arg=known,
                                    timeout=timeout * 1000)
        return self.latest_run_id()

    def reply(self, run_id: int) -> dict:
        """What the page holds for a reply: raw text, token count, status, connections."""
        return self.page.evaluate("""id => { const r = ChatUI.replies[id]; return r && {
            text: r.text, have: r.stream ? r.stream.have : r.completionTokens, status: r.run.status,
            connects: r.stream ? r.stream.connects : 0, renders: r.renders, tokenEvents: r.tokenEvents}; }""", run_id)

    def wait_tokens(self, run_id: int, n: int, timeout: float = 30) -> None:
        self.page.wait_for_function("([id, n]) => { const r = ChatUI.replies[id]; return r && r.stream && r.stream.have >= n; }",
                                    arg=[run_id, n], timeout=timeout * 1000)

    def wait_settled(self, run_id: int, timeout: float = 60) -> dict:
        """Until the reply's terminal event arrived and its figures are shown."""
        self.page.wait_for_function(
            """id => { const r = ChatUI.replies[id]; return r && ['completed', 'failed', 'cancelled'].includes(r.run.status)
                       && r.el.querySelector('.stat-model'); }""", arg=run_id, timeout=timeout * 1000)
        return self.reply(run_id)

    def article(self, run_id: int):
        return self.page.locator(f'article[data-run-id="{run_id}"]')

    def watch_badges(self, run_id: int) -> None:
        """From now on, record every label (.badge) the reply's footer shows, even one replaced
        in the same task (the observer reads the nodes added, not the page as it is later)."""
        self.page.evaluate("""id => { window.badgesSeen = [];
            new MutationObserver((records) => { for (const r of records) for (const n of r.addedNodes) {
                const article = n.nodeType === 1 && r.target.closest && r.target.closest("article");
                if (!article || article.dataset.runId !== String(id)) continue;
                for (const b of [n, ...n.querySelectorAll(".badge")]) if (b.matches(".badge")) badgesSeen.push(b.textContent);
            } }).observe(document.getElementById("thread"), { childList: true, subtree: true }); }""", run_id)

    def watch_busy(self) -> None:
        """From now on, record every reply whose article was marked busy (aria-busy="true"),
        even for a moment: a short reply may stream and settle between two looks at the page."""
        self.page.evaluate("""() => { window.busySeen = new Set();
            const note = el => { if (el.nodeType === 1 && el.matches("article[data-run-id]")
                                     && el.getAttribute("aria-busy") === "true") busySeen.add(Number(el.dataset.runId)); };
            new MutationObserver((records) => { for (const r of records) {
                if (r.type === "attributes" && r.oldValue === "true" && r.attributeName === "aria-busy")
                    busySeen.add(Number(r.target.dataset.runId));
                note(r.target);
                for (const n of r.addedNodes) { note(n); if (n.querySelectorAll) n.querySelectorAll("article[data-run-id]").forEach(note); }
            } }).observe(document.getElementById("thread"), { childList: true, subtree: true, attributes: true,
                                                               attributeOldValue: true, attributeFilter: ["aria-busy"] }); }""")

    def busy_seen(self) -> list[int]:
        """The run ids whose reply was seen busy since watch_busy."""
        return self.page.evaluate("() => [...window.busySeen]")

    def badges_seen(self) -> list[str]:
        """The labels recorded since watch_badges, in order."""
        return self.page.evaluate("() => window.badgesSeen")

    def notice(self):
        return self.page.get_by_role("alert").filter(has=self.page.locator(".notice-title")).last

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        """Call the REST API with the page's session cookie and CSRF token."""
        return self.page.evaluate("""async ([method, path, body]) => {
            const r = await ChatUI.api.request(method, path, body === null ? undefined : body);
            return {status: r.status, data: r.data}; }""", [method, path, body])


def saved_run(run_id: int, timeout: float = 20) -> GenerationRun:
    """The run once finalize has saved it."""
    end = time.monotonic() + timeout
    while True:
        run = GenerationRun.objects.select_related("assistant_message", "user_message", "pool").get(pk=run_id)
        if run.status in TERMINAL or time.monotonic() > end:
            return run
        time.sleep(0.05)


__all__ = ["ChatPage", "saved_run", "expect", "LONG_REPLY", "CHROMIUM", "CHROMIUM_ARGS"]
