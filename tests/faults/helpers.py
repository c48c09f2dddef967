"""Checks every fault test makes: one terminal state, byte-identical text everywhere."""
import time

import httpx

from chatsite import redis_keys
from chatsite.runs.models import GenerationRun
from chatsite.runs.stream import codec
from chatsite.runs.stream.log import rebuild
from tests import stack
from tests.faults.conftest import POOL
from tests.runs.helpers import wait_terminal  # noqa: F401 (the fault tests import it from here too)


def post(base, auth, chat_id, **body):
    """A message posted through web `base` (a question long replies can follow); its run, once accepted."""
    resp = httpx.post(f"{base}/api/chats/{chat_id}/messages/", headers=auth,
                      json={"content": "Tell me about loops.", **body}, timeout=30)
    assert resp.status_code == 202, resp.text
    return resp.json()["run"]


def replace_worker(fault_stack, name):
    """The worker `name` stopped and a fresh one started under its name: the next test finds two again."""
    fault_stack["workers"][name].stop(timeout=5)
    fault_stack["workers"][name] = stack.start_worker(fault_stack["env"], pool=POOL, name=name)


def holder_of(run_id: int, timeout: float = 20) -> str:
    """The hostname of the worker running the run, once one claims it (TimeoutError if none does)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        run = GenerationRun.objects.get(pk=run_id)
        if run.worker and run.status == GenerationRun.Status.RUNNING:
            return run.worker.split("@")[0]
        time.sleep(0.02)
    raise TimeoutError(f"run {run_id}: no worker claimed it in {timeout} s")


def stream_entries(client, run_id):
    return [codec.decode(i, f) for i, f in client.xrange(redis_keys.run_stream(run_id))]


def assert_nothing_lost(client, run_id, *client_texts) -> GenerationRun:
    """Exactly one terminal state, exactly one terminal entry, contiguous seq, and the
    saved text == the text rebuilt from the stream == every client's text."""
    run = wait_terminal(run_id)
    entries = stream_entries(client, run_id)
    assert sum(e.is_terminal for e in entries) == 1 and entries[-1].is_terminal
    tokens = [e for e in entries if e.type == codec.TOKEN]
    expected = 0
    for e in tokens:  # contiguous; a repeated entry (a retried write) may only repeat what is there
        assert e.seq <= expected, f"gap before seq {e.seq}"
        expected = max(expected, e.seq + e.n)
    rebuilt = rebuild(entries)
    assert rebuilt.completion_tokens == run.completion_tokens
    if run.status == GenerationRun.Status.COMPLETED:
        assert run.assistant_message.content == rebuilt.text
        for text in client_texts:
            assert text.encode() == rebuilt.text.encode()
    return run
