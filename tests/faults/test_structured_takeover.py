"""A constrained reply survives its worker (issue 43 §3): a JSON Schema reply and a
`tool_choice: required` call, streamed from /v1/chat/completions, their worker SIGKILLed
or paused past its lease at a random point; the other worker takes the run up with the
grammar advanced over the reply so far, and the reply ends as valid JSON of its schema,
equal to what the client streamed. The fake engine carries a grammar on only when told
the reply so far (as vLLM with inference.carried_grammar); the real engine's trials, 20
of each, are bench/structured_takeover.py's."""
import json
import random
import signal
import threading
import time

import httpx
import pytest

from bench.structured_shapes import SHAPES, Shapes, client_text, same
from chatsite.pools.models import ModelPool
from chatsite.runs.models import GenerationRun
from inference.chat_templates import SMOLLM2_TOOLS
from tests import stack
from tests.factories import PoolFactory
from tests.faults.conftest import POOL
from tests.faults.helpers import assert_nothing_lost, holder_of
from tests.faults.hosts.probes import streamed

pytestmark = pytest.mark.django_db(transaction=True)

# Long strings: a reply of some 200 tokens, two seconds at the fake engine's pace.
REPORT = {"type": "object", "properties": {f"field_{i}": {"type": "string", "minLength": 40} for i in range(12)},
          "required": [f"field_{i}" for i in range(12)]}
# The fake engine writes an instance of the schema (inference.fake_json), the call's arguments too.
LONG = Shapes(REPORT, "file_report", REPORT, "Report the outage.", "File the report.")
PAUSE_LIMIT_SECONDS = 30  # the lease is 4 s in tests and beat sweeps every second
TRIALS = [(shape, fault) for shape in SHAPES for fault in ("kill", "pause")]


def _fault(fault_stack, fault_redis_client, run_id: int, at: int, fault: str, done: dict) -> None:
    """At `at` tokens streamed, SIGKILL the worker writing the run, or pause it (SIGSTOP)
    until another attempt holds the run, then let it go on (its writes are fenced)."""
    while streamed(fault_redis_client, run_id) < at:
        time.sleep(0.003)
    done["holder"] = holder = holder_of(run_id)
    proc = fault_stack["workers"][holder]
    if fault == "kill":
        proc.signal(signal.SIGKILL)
        return
    proc.signal(signal.SIGSTOP)
    end = time.monotonic() + PAUSE_LIMIT_SECONDS
    while GenerationRun.objects.get(pk=run_id).attempt < 2 and time.monotonic() < end:
        time.sleep(0.05)
    proc.signal(signal.SIGCONT)


@pytest.mark.parametrize("shape,fault", TRIALS)
def test_a_constrained_reply_whose_worker_dies_or_stalls_ends_as_the_json_the_client_streamed(
        fault_stack, fault_redis_client, auth, shape, fault):
    PoolFactory(name=POOL, max_output_tokens=2000, context_length=4096)
    ModelPool.objects.filter(name=POOL).update(chat_template=SMOLLM2_TOOLS)  # a template that reads tools
    at = random.Random(f"43.3-{shape}-{fault}").randint(2, 150)  # of some 200 tokens
    body = {"model": POOL, "stream": True, "max_tokens": 1500, **LONG.body(shape)}
    chunks, done = [], {}
    with httpx.stream("POST", f"{fault_stack['webs'][0]}/v1/chat/completions", json=body, headers=auth,
                      timeout=90) as resp:
        assert resp.status_code == 200, resp.read()
        run_id = int(resp.headers["x-run-id"])
        faulting = threading.Thread(target=_fault, args=(fault_stack, fault_redis_client, run_id, at, fault, done),
                                    daemon=True)
        faulting.start()
        for line in resp.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line.removeprefix("data: ")))
    faulting.join(PAUSE_LIMIT_SECONDS + 5)
    holder = done["holder"]
    try:
        run = assert_nothing_lost(fault_redis_client, run_id)
        assert run.status == "completed" and run.attempt == 2 and run.worker.split("@")[0] != holder, run.error
        saved = run.assistant_message.content  # the model's text: valid JSON of its schema, what the client read
        assert LONG.problem(shape, saved) is None and same(shape, saved, client_text(shape, chunks)), saved
        if shape == "tool_required":
            assert [c["choices"][0]["finish_reason"] for c in chunks
                    if c.get("choices") and c["choices"][0].get("finish_reason")] == ["tool_calls"]
    finally:
        if fault == "kill":
            fault_stack["workers"][holder].stop(timeout=5)
            fault_stack["workers"][holder] = stack.start_worker(fault_stack["env"], pool=POOL, name=holder)
