"""The web under uvicorn (chatsite/edge/web_server.py, CHATSITE_WEB_SERVER=uvicorn): the same
product as under daphne. The body limit and the access log's redaction are checked for
both servers in tests/security; here, a reply streamed through each surface, and a
SIGTERM that ends uvicorn's open streams within its grace period, after which the
client resumes on another web without losing or repeating a token."""
import signal
import subprocess
import sys
import time

import httpx
import pytest

from chatsite.runs.models import GenerationRun
from tests import stack
from tests.faults.client import follow_in_thread
from tests.runs.helpers import post_message, wait_terminal
from tests.sse import read_events, text_of
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

GRACE_SECONDS = 2


def test_an_unknown_server_is_refused_by_name():
    done = subprocess.run([sys.executable, "-m", "chatsite.edge.web_server", "--server", "gunicorn"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "must be one of daphne, uvicorn, not 'gunicorn'" in done.stderr


def test_a_reply_streams_through_rest_sse_and_resumes(uvicorn_url, fake_workers, auth, chat):
    run = post_message(uvicorn_url, auth, chat.pk, max_tokens=12)
    url = f"{uvicorn_url}{run['events_url']}"
    first = read_events(url, headers=auth, max_events=3)  # then the connection drops
    rest = read_events(url, headers=auth, last_event_id=first[-1].id)
    assert rest[-1].event == "done" and {e.id for e in first}.isdisjoint(e.id for e in rest)
    saved = wait_terminal(run["id"])
    assert text_of(first + rest) == saved.assistant_message.content != ""


def test_a_chat_completion_streams_through_v1(uvicorn_url, fake_workers, pool, api_key):
    client = v1_client(uvicorn_url, api_key)
    chunks = list(client.chat.completions.create(
        model="flagship", messages=[{"role": "user", "content": "Say hello."}], max_tokens=8, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and chunks[-1].usage.completion_tokens == 8
    run = wait_terminal(int(chunks[0].id.removeprefix("chatcmpl-")))
    assert run.assistant_message.content == text and run.source == GenerationRun.Source.OPENAI


@pytest.fixture
def dying_uvicorn(stack_env):
    proc, url = stack.start_web({**stack_env, "CHATSITE_WEB_GRACE_SECONDS": str(GRACE_SECONDS)}, server="uvicorn",
                                name="web-uvicorn-sigterm")
    yield proc, url
    proc.stop()


def test_sigterm_ends_open_streams_within_the_grace_period_and_the_client_resumes_elsewhere(
        dying_uvicorn, live_url, fake_workers, auth, chat):
    proc, url = dying_uvicorn
    run = post_message(url, auth, chat.pk, max_tokens=500, ignore_eos=True)  # ~5 s at the fake engine's pace
    thread, box = follow_in_thread(run["events_url"], auth, base_urls=[url, live_url], watchdog=60)
    end = time.monotonic() + 30
    while GenerationRun.objects.get(pk=run["id"]).status != GenerationRun.Status.RUNNING and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.5)  # tokens are flowing to the client through uvicorn
    proc.signal(signal.SIGTERM)
    stopped_at = time.monotonic()
    proc.popen.wait(GRACE_SECONDS + 10)
    took = time.monotonic() - stopped_at
    thread.join(90)
    assert "error" not in box, box.get("error")
    followed = box["result"]
    saved = wait_terminal(run["id"])
    assert saved.status == GenerationRun.Status.COMPLETED and saved.completion_tokens == 500
    assert followed.reconnects >= 1 and followed.terminal.event == "done"
    ids = [e.id for e in followed.events if e.id]
    assert len(ids) == len(set(ids))  # nothing twice
    assert followed.text == saved.assistant_message.content  # nothing lost
    log = proc.log_text()
    assert took <= GRACE_SECONDS + 5, (took, log[-2000:])
    print(f"uvicorn stopped {took:.1f} s after SIGTERM (grace {GRACE_SECONDS} s); the client reconnected "
          f"{followed.reconnects} time(s)")
