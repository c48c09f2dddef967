"""What users do through the stack: the official openai SDK, a browser reading the chat page,
and a REST client following a run's events the way the page's EventSource does (reconnecting
with Last-Event-ID). And what the platform saved, read from its Postgres and Redis."""
import json
import threading
import time
from dataclasses import dataclass, field

import httpx
import openai
import psycopg
import redis

from bench.sse_client import LineParser
from chatsite import redis_keys
from chatsite.runs.stream import codec

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]


@dataclass
class Streamed:
    text: str = ""
    arrivals: list[float] = field(default_factory=list)
    run_id: int | None = None
    error: str | None = None
    reconnects: int = 0

    def longest_gap(self) -> float:
        return max((b - a for a, b in zip(self.arrivals, self.arrivals[1:])), default=0.0)


def sdk_stream(url: str, key: str, prompt: str, *, max_tokens: int, ignore_eos: bool = False,
               out: Streamed | None = None) -> Streamed:
    """A streamed /v1/chat/completions read to its end; `out` fills as it goes (for a thread)."""
    out = out or Streamed()
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, timeout=300, max_retries=0)
    try:
        raw = client.chat.completions.with_raw_response.create(
            model="flagship", messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, stream=True,
            extra_body={"ignore_eos": ignore_eos} if ignore_eos else None)
        out.run_id = int(raw.headers["X-Run-Id"])
        for chunk in raw.parse():
            if chunk.choices and chunk.choices[0].delta.content:
                out.text += chunk.choices[0].delta.content
                out.arrivals.append(time.monotonic())
    except Exception as exc:  # reported by the step that reads `out`
        out.error = f"{type(exc).__name__}: {exc}"
    return out


def in_thread(fn, *args, **kwargs) -> tuple[threading.Thread, Streamed]:
    out = Streamed()
    thread = threading.Thread(target=fn, args=args, kwargs={**kwargs, "out": out}, daemon=True)
    thread.start()
    return thread, out


def follow_events(url: str, key: str, events_url: str, *, out: Streamed, watchdog: float = 120) -> Streamed:
    """A run's events to the terminal one, reconnecting with Last-Event-ID after any error."""
    headers, last_id, last_seen = {"Authorization": f"Bearer {key}"}, None, time.monotonic()
    while time.monotonic() - last_seen < watchdog:
        try:
            with httpx.stream("GET", url + events_url, timeout=httpx.Timeout(30, connect=5),
                              headers={**headers, **({"Last-Event-ID": last_id} if last_id else {})}) as resp:
                resp.raise_for_status()
                parser = LineParser()
                for line in resp.iter_lines():
                    if (event := parser.feed(line)) is None:
                        continue
                    event_id, kind, data = event
                    last_id, last_seen = event_id or last_id, time.monotonic()
                    if kind == "token":
                        out.text += json.loads(data)["text"]
                        out.arrivals.append(last_seen)
                    elif kind == "snapshot":  # what came before is replaced
                        out.text = json.loads(data)["text"]
                    elif kind in ("done", "error"):
                        return out
        except httpx.HTTPError:
            time.sleep(0.5)
        out.reconnects += 1
    out.error = f"no event for {watchdog} s"
    return out


def browser_chat(url: str, prompt: str, *, timeout: float = 180) -> dict:
    """Sign in as the demo user in Chromium, send `prompt` on a new chat, wait for the reply."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page()
            page.goto(url + "/login/")
            page.get_by_label("Username").fill("demo")
            page.get_by_label("Password").fill("demo-password")
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(url + "/", timeout=30_000)
            box = page.get_by_label("Message", exact=True)
            box.fill(prompt)
            box.press("Enter")
            page.wait_for_function("() => Object.values(ChatUI.replies).some(r => "
                                   "['completed', 'failed', 'cancelled'].includes(r.run.status))", timeout=timeout * 1000)
            return page.evaluate("() => { const r = Object.values(ChatUI.replies)[0]; "
                                 "return {run_id: r.run.id, status: r.run.status, text: r.text}; }")
        finally:
            browser.close()


class Saved:
    """The platform's record of a run, read from the stack's Postgres and Redis."""

    def __init__(self, *, pg_host: str, pg_password: str, redis_host: str):
        self.dsn = f"postgresql://chatsite:{pg_password}@{pg_host}:5432/chatsite"
        self.redis_host = redis_host

    def run(self, run_id: int) -> dict:
        with psycopg.connect(self.dsn, connect_timeout=5) as conn:
            row = conn.execute(
                "select r.status, r.worker, r.attempt, r.completion_tokens, m.content from runs_generationrun r "
                "join chats_message m on m.id = r.assistant_message_id where r.id = %s", (run_id,)).fetchone()
        return dict(zip(("status", "worker", "attempt", "completion_tokens", "content"), row))

    def wait_run(self, run_id: int, *, until, timeout: float) -> dict:
        end = time.monotonic() + timeout
        while not until(run := self.run(run_id)):
            if time.monotonic() > end:
                raise TimeoutError(f"run {run_id}: {run}")
            time.sleep(0.2)
        return run

    def entries(self, run_id: int) -> list:
        client = redis.Redis(host=self.redis_host, port=6379, socket_timeout=5, decode_responses=True)
        return [codec.decode(i, f) for i, f in client.xrange(redis_keys.run_stream(run_id))]

    def terminal_entries(self, run_id: int) -> int:
        return sum(e.is_terminal for e in self.entries(run_id))
