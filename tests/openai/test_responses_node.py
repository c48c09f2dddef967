"""The Responses API driven by the official `openai` npm package (Node) against the live
server: create, stream, and resume with starting_after (tests/openai/node/responses_calls.mjs)."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from chatsite.runs.models import GenerationRun
from tests.runs.helpers import wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)

NODE_DIR = Path(__file__).parent / "node"  # the openai npm package, installed by scripts/setup.sh --dev


def test_the_node_sdk_creates_streams_and_resumes(live_url, fake_workers, pool, api_key):
    node = shutil.which("node")
    assert node, "Node.js is needed (the machine image has it)"
    assert (NODE_DIR / "node_modules" / "openai").is_dir(), "run scripts/setup.sh --dev (npm ci in tests/openai/node)"
    done = subprocess.run([node, "responses_calls.mjs"], cwd=NODE_DIR, capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ["PATH"], "BASE_URL": f"{live_url}/v1", "API_KEY": api_key})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    created = out["created"]
    run = wait_terminal(int(created["id"].removeprefix("resp_")))
    assert created["status"] == "completed" and created["output_text"] == run.assistant_message.content != ""
    assert created["metadata"] == {"from": "node"} and created["instructions"] == "Be terse."
    events = out["events"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    streamed = GenerationRun.objects.select_related("assistant_message").get(
        pk=int(events[0]["response"]["id"].removeprefix("resp_")))
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == streamed.assistant_message.content == out["retrieved"]["output_text"]
    assert out["resumed"] == events[6:]
