"""The Responses API driven by the official `openai` npm package (Node) against the live
server: create, stream, and resume with starting_after. Skipped, saying why, when
node or npm is missing or the npm registry cannot be reached."""
import json
import os
import shutil
import subprocess

import pytest

from chatsite.runs.models import GenerationRun
from tests.runs.helpers import wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)

NPM_PACKAGE = "openai@5.23.2"
SCRIPT = """
import OpenAI from "openai";
const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: process.env.API_KEY, maxRetries: 0 });
const created = await client.responses.create({ model: "flagship", input: "Explain loops.", max_output_tokens: 200,
                                                instructions: "Be terse.", metadata: { from: "node" } });
const events = [];
const stream = await client.responses.create({ model: "flagship", input: "Explain lists.", max_output_tokens: 200,
                                               stream: true, background: true });
for await (const event of stream) events.push(event);
const id = events[0].response.id;
const resumed = [];
for await (const event of await client.responses.retrieve(id, { stream: true, starting_after: 5 })) resumed.push(event);
const retrieved = await client.responses.retrieve(id);
console.log(JSON.stringify({ created, events, resumed, retrieved }));
"""


@pytest.fixture(scope="session")
def node_openai(tmp_path_factory):
    """A directory with the openai npm package installed, once per session."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node or npm is not installed")
    where = tmp_path_factory.mktemp("node-openai")
    (where / "package.json").write_text('{"private": true, "type": "module"}')
    try:
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", NPM_PACKAGE], cwd=where,
                       check=True, capture_output=True, timeout=180)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"could not install {NPM_PACKAGE} from the npm registry: {exc}")
    return where


def test_the_node_sdk_creates_streams_and_resumes(node_openai, live_url, fake_workers, pool, api_key):
    script = node_openai / "responses.mjs"
    script.write_text(SCRIPT)
    done = subprocess.run(["node", str(script)], cwd=node_openai, capture_output=True, text=True, timeout=120,
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
