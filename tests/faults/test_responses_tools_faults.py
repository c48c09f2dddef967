"""The Responses tool and structured-output flows when the worker writing the reply dies
part-way: a function call (tool_choice auto, which the model writes freely) is carried
on by another worker and the client's stream reads one whole call, the same a retrieve
and a re-read give; so is a reply constrained to a schema, its grammar advanced over the
reply so far (inference.carried_grammar), to one whole value of its schema."""
import json
import signal
import threading
import time

import httpx
import jsonschema
import pytest

from chatsite.pools.models import ModelPool
from inference.chat_templates import SMOLLM2_TOOLS
from tests import stack
from tests.factories import PoolFactory
from tests.faults.conftest import POOL
from tests.faults.helpers import assert_nothing_lost, holder_of, wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)

# Many long fields: a call (or a value) of some 500 tokens, five seconds at the fake engine's pace.
BIG = {"type": "object", "properties": {f"field_{i}": {"type": "string", "minLength": 40} for i in range(30)},
       "required": [f"field_{i}" for i in range(30)]}
TOOLS = [{"type": "function", "name": "file_report", "description": "File a report", "parameters": BIG}]


def _events(raw: bytes) -> list[dict]:
    return [json.loads(chunk.split(b"\ndata: ", 1)[1]) for chunk in raw.split(b"\n\n")
            if chunk and not chunk.startswith(b":")]


def _stream_through_a_kill(fault_stack, fault_redis_client, auth, body: dict) -> tuple[int, bytes, str]:
    """POST a streamed response, kill the worker writing it once it has written some
    (watched apart: a call's text reaches the client only once it is whole), and read the
    stream to its end (it goes on with the run on another worker)."""
    raw, killed = b"", {}

    def kill_the_writer(run_id: int) -> None:
        while fault_redis_client.xlen(f"run:{run_id}") < 20:
            time.sleep(0.005)
        killed["holder"] = holder_of(run_id)
        fault_stack["workers"][killed["holder"]].signal(signal.SIGKILL)

    with httpx.stream("POST", f"{fault_stack['webs'][0]}/v1/responses", json=body, headers=auth,
                      timeout=90) as resp:
        assert resp.status_code == 200, resp.read()
        run_id = int(resp.headers["x-run-id"])
        watcher = threading.Thread(target=kill_the_writer, args=(run_id,), daemon=True)
        watcher.start()
        for piece in resp.iter_bytes():
            raw += piece
    watcher.join(5)
    assert "holder" in killed, "the reply ended before the kill"
    return run_id, raw, killed["holder"]


def _restart(fault_stack, holder: str) -> None:
    fault_stack["workers"][holder].stop(timeout=5)
    fault_stack["workers"][holder] = stack.start_worker(fault_stack["env"], pool=POOL, name=holder)


def test_a_function_call_is_carried_on_by_another_worker_whole(fault_stack, fault_redis_client, auth):
    PoolFactory(name=POOL, max_output_tokens=2000, context_length=4096)
    ModelPool.objects.filter(name=POOL).update(chat_template=SMOLLM2_TOOLS)
    body = {"model": POOL, "input": "Use file_report for the outage.", "tools": TOOLS, "stream": True,
            "background": True, "max_output_tokens": 1500}
    run_id, raw, holder = _stream_through_a_kill(fault_stack, fault_redis_client, auth, body)
    try:
        run = assert_nothing_lost(fault_redis_client, run_id)
        assert run.status == "completed" and run.attempt == 2 and run.worker.split("@")[0] != holder
        events = _events(raw)
        final = events[-1]["response"]
        assert events[-1]["type"] == "response.completed" and [i["type"] for i in final["output"]] == [
            "message", "function_call"]
        call = final["output"][1]
        jsonschema.validate(json.loads(call["arguments"]), BIG)
        streamed = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
        assert streamed == call["arguments"]
        base = fault_stack["webs"][1]
        again = httpx.get(f"{base}/v1/responses/resp_{run_id}", params={"stream": "true"}, headers=auth,
                          timeout=30).content
        assert _events(again) == events  # read again, on another web: the same events
        assert httpx.get(f"{base}/v1/responses/resp_{run_id}", headers=auth, timeout=30).json() == final
        answered = httpx.post(f"{base}/v1/responses", headers=auth, timeout=60, json={
            "model": POOL, "previous_response_id": final["id"], "tools": TOOLS, "max_output_tokens": 20,
            "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "filed"}]}).json()
        assert answered["status"] in ("completed", "incomplete") and answered["output"][0]["type"] == "message"
    finally:
        _restart(fault_stack, holder)


def test_a_structured_reply_cut_by_a_dead_worker_is_carried_on_whole(fault_stack, fault_redis_client, auth):
    PoolFactory(name=POOL, max_output_tokens=2000, context_length=4096)
    fmt = {"format": {"type": "json_schema", "name": "report", "schema": BIG, "strict": True}}
    body = {"model": POOL, "input": "Report the outage.", "text": fmt, "stream": True, "max_output_tokens": 1500}
    run_id, raw, holder = _stream_through_a_kill(fault_stack, fault_redis_client, auth, body)
    try:
        events = _events(raw)
        assert events[-1]["type"] == "response.completed", events[-1]
        text = events[-1]["response"]["output"][0]["content"][0]["text"]
        jsonschema.validate(json.loads(text), BIG)  # its grammar went on from the reply so far
        assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == text
        run = assert_nothing_lost(fault_redis_client, run_id)
        assert run.status == "completed" and run.attempt == 2 and run.assistant_message.content == text
    finally:
        _restart(fault_stack, holder)
