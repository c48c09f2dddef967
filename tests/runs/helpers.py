"""Shared steps for tests that drive the live API."""
import time

import httpx

from chatsite.runs.models import GenerationRun


def post_message(live_url: str, auth: dict, chat_id: int, content: str = "Explain the for statement.", **extra) -> dict:
    resp = httpx.post(f"{live_url}/api/chats/{chat_id}/messages/", headers=auth,
                      json={"content": content, **extra}, timeout=10)
    assert resp.status_code == 202, resp.text
    return resp.json()["run"]


def wait_terminal(run_id: int, timeout: float = 60) -> GenerationRun:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        run = GenerationRun.objects.select_related("assistant_message").get(pk=run_id)
        if run.is_terminal:
            return run
        time.sleep(0.05)
    raise TimeoutError(f"run {run_id} is still {run.status} after {timeout} s")
