"""A background response outlives its client, its worker and its web process: the run
goes on on another worker, and its stream resumed on another web process with
starting_after is byte-exact."""
import json
import signal
import time

import httpx
import pytest

from chatsite.openai_api.models import ResponseRecord
from tests import stack
from tests.factories import PoolFactory
from tests.faults.conftest import POOL
from tests.faults.helpers import assert_nothing_lost, holder_of

pytestmark = pytest.mark.django_db(transaction=True)


def _events(raw: bytes) -> list[bytes]:
    return [chunk + b"\n\n" for chunk in raw.split(b"\n\n") if chunk and not chunk.startswith(b":")]


def test_a_response_survives_its_worker_and_web_and_resumes_byte_exact(fault_stack, fault_redis_client, auth):
    PoolFactory(name=POOL, max_output_tokens=2000, context_length=4096)
    doomed_web, url = stack.start_web(fault_stack["env"])
    body = {"model": POOL, "input": "Tell me about loops.", "stream": True, "background": True,
            "max_output_tokens": 300, "ignore_eos": True}  # ~3 s at the fake engine's pace
    raw = b""
    with httpx.stream("POST", f"{url}/v1/responses", json=body, headers=auth, timeout=30) as resp:
        assert resp.status_code == 200, resp.read()
        run_id = int(resp.headers["x-run-id"])
        for piece in resp.iter_bytes():
            raw += piece
            if len(_events(raw[:raw.rfind(b"\n\n") + 2])) >= 10:
                break
    prefix = _events(raw[:raw.rfind(b"\n\n") + 2])[:10]
    holder = holder_of(run_id)
    while fault_redis_client.xlen(f"run:{run_id}") < 40:
        time.sleep(0.005)
    fault_stack["workers"][holder].signal(signal.SIGKILL)
    doomed_web.signal(signal.SIGKILL)
    try:
        base = fault_stack["webs"][0]
        resumed = httpx.get(f"{base}/v1/responses/resp_{run_id}", params={"stream": "true", "starting_after": "9"},
                            headers=auth, timeout=90).content  # follows the run live to its end on the new worker
        run = assert_nothing_lost(fault_redis_client, run_id)
        assert run.status == "completed" and run.finish_reason == "length"
        assert run.attempt == 2 and run.worker.split("@")[0] != holder and run.completion_tokens == 300
        full = _events(httpx.get(f"{base}/v1/responses/resp_{run_id}", params={"stream": "true"}, headers=auth,
                                 timeout=30).content)
        assert prefix + _events(resumed) == full
        last = json.loads(full[-1].split(b"\ndata: ", 1)[1])
        assert last["type"] == "response.incomplete" and last["response"]["usage"]["output_tokens"] == 300
        text = "".join(json.loads(e.split(b"\ndata: ", 1)[1]).get("delta", "") for e in full)
        assert text == run.assistant_message.content
        assert ResponseRecord.objects.get(run_id=run_id).background is True
    finally:
        doomed_web.stop()
        fault_stack["workers"][holder].stop(timeout=5)
        fault_stack["workers"][holder] = stack.start_worker(fault_stack["env"], pool=POOL, name=holder)


def test_a_response_resumed_across_a_redis_restart_without_persistence_is_told_to_start_over(
        fault_stack, fault_redis, fault_redis_client, auth):
    """Every entry lost, the run writes its reply again from token 0 in other entries: a
    client resuming with a number of the lost stream gets an `error` event saying to
    start over, not the new stream's text after the old one's; streamed again, the
    response is the saved reply once."""
    PoolFactory(name=POOL, max_output_tokens=2000, context_length=4096)
    base = fault_stack["webs"][0]
    body = {"model": POOL, "input": "Tell me about loops.", "stream": True, "background": True,
            "max_output_tokens": 300, "ignore_eos": True}
    raw = b""
    with httpx.stream("POST", f"{base}/v1/responses", json=body, headers=auth, timeout=30) as resp:
        assert resp.status_code == 200, resp.read()
        run_id = int(resp.headers["x-run-id"])
        for piece in resp.iter_bytes():
            raw += piece
            if len(_events(raw[:raw.rfind(b"\n\n") + 2])) >= 10:
                break
    while fault_redis_client.xlen(f"run:{run_id}") < 40:
        time.sleep(0.005)
    fault_redis.restart_empty()
    url = f"{base}/v1/responses/resp_{run_id}"
    resumed = _events(httpx.get(url, params={"stream": "true", "starting_after": "9"}, headers=auth,
                                timeout=90).content)
    told = [json.loads(e.split(b"\ndata: ", 1)[1]) for e in resumed]
    assert [(e["type"], e.get("code")) for e in told] == [("error", "stream_restarted")], told
    assert told[0]["sequence_number"] > 9
    run = assert_nothing_lost(fault_redis_client, run_id)
    assert run.status == "completed" and run.attempt >= 2 and run.completion_tokens == 300
    full = [json.loads(e.split(b"\ndata: ", 1)[1]) for e in _events(httpx.get(
        url, params={"stream": "true"}, headers=auth, timeout=30).content)]
    assert "".join(e.get("delta", "") for e in full) == run.assistant_message.content
    numbers = [e["sequence_number"] for e in full]
    assert numbers[:4] == [0, 1, 2, 3] and numbers[4] > 9 and numbers[4:] == list(range(numbers[4], numbers[-1] + 1))
