"""Shared steps for tests that drive the live API."""
import re
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
    raise TimeoutError(f"run {run_id} is still {run.status} after {timeout} s; what the stack's logs say of it:\n"
                       + "\n".join(logged_about(run_id)))


def logged_about(run_id: int, limit: int = 40) -> list[str]:
    """The live stack's log lines (tests.stack.LOG_DIR) naming run `run_id`, or an error:
    why a run stayed running (its lease lapsed on a stalled worker, a write failed) is
    there, and a stack without beat never sweeps such a run on."""
    from tests.stack import LOG_DIR

    named = re.compile(rf"\brun(?:\(s\))? \[?(?:\d+, )*{run_id}\b")
    lines = []
    for path in sorted(LOG_DIR.glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if named.search(line) or " ERROR " in line or line.startswith("Traceback"):
                lines.append(f"{path.stem}: {line}")
    return lines[-limit:]


def xadd_tokens(run_id: int, parts: list[str], start: int = 0, attempt: int = 1) -> list[str]:
    """Token entries written straight to the stream (as an attempt's writer would), one token each."""
    from chatsite import redis_keys
    from chatsite.redis_client import get_redis
    from chatsite.runs.stream import codec

    r = get_redis()
    return [r.xadd(redis_keys.run_stream(run_id), codec.token_fields(seq=start + i, n=1, text=text, attempt=attempt))
            for i, text in enumerate(parts)]


def end_stream(run_id: int, fields: dict) -> None:
    """Write the run's terminal entry the way every writer does: as the lease holder."""
    from chatsite.runs.services import run_claim, run_release
    from chatsite.runs.stream import log

    claim = run_claim(run_id=run_id, worker="test-writer")
    assert claim is not None, f"run {run_id} is held or finished"
    try:
        assert log.end(run_id=run_id, lease_token=claim.lease_token, fields=fields)
    finally:
        run_release(run_id=run_id, lease_token=claim.lease_token)


def finish_run(run, text="Done.", **done):
    """End a run as its worker would: its text, its terminal entry, its saving (which starts its
    chat's queue). Returns the run as saved."""
    from chatsite.runs.services import run_finalize
    from chatsite.runs.stream import codec

    xadd_tokens(run.pk, [text])
    end_stream(run.pk, codec.done_fields(**{"finish_reason": "stop", "prompt_tokens": 3, "completion_tokens": 1,
                                            **done}))
    run_finalize(run_id=run.pk)
    return GenerationRun.objects.get(pk=run.pk)


def run_ending(status: str = GenerationRun.Status.COMPLETED, reason: str = "stop"):
    """A worker's ending of a run, as finalize.run_finish takes it: the reply "Hi!" in two tokens."""
    from django.utils import timezone

    from chatsite.runs.store import finalize

    return finalize.Ending(status=status, finished_at=timezone.now(), finish_reason=reason, completion_tokens=2,
                           prompt_tokens=4, error=None, first_token_at=None, itl_ms=None, logprobs="[]",
                           details=None, text="Hi!")


def queued_messages(queue: str) -> list[tuple[list, dict]]:
    """(args, kwargs) of the generation messages waiting in a Celery queue, oldest first
    (kombu's Redis transport LPUSHes JSON envelopes whose body is base64 JSON)."""
    import base64
    import json

    from chatsite.redis_client import get_redis

    out = []
    for raw in reversed(get_redis().lrange(queue, 0, -1)):
        args, kwargs, _ = json.loads(base64.b64decode(json.loads(raw)["body"]))
        out.append((args, kwargs))
    return out
