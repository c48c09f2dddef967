"""The official `openai` npm package (tests/openai/node, installed by scripts/setup.sh
--dev) against the live stack: chat and text completions, streaming and not, an
idempotent retry, a refusal by name and the rate-limit headers."""
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from chatsite.quotas.models import TenantQuota
from chatsite.runs.models import GenerationRun
from tests.runs.helpers import wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)

NODE_DIR = Path(__file__).parent / "node"


def test_the_node_sdk_gets_the_saved_replies(live_url, fake_workers, pool, api_key, tenant):
    node = shutil.which("node")
    assert node, "Node.js is needed (the machine image has it)"
    assert (NODE_DIR / "node_modules" / "openai").is_dir(), "run scripts/setup.sh --dev (npm ci in tests/openai/node)"
    TenantQuota.objects.create(tenant=tenant, requests_per_minute=1000)
    if 60 - time.time() % 60 < 20:  # the per-minute count would renew while the script runs
        time.sleep(60 - time.time() % 60 + 0.5)
    env = {**os.environ, "OPENAI_BASE_URL": f"{live_url}/v1", "OPENAI_API_KEY": api_key}
    done = subprocess.run([node, "sdk_calls.mjs"], cwd=NODE_DIR, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)

    def run(completion_id, prefix):
        # A streamed reply's end reaches the client before its worker saves it: read it once saved.
        assert completion_id.startswith(prefix)
        return wait_terminal(int(completion_id[len(prefix):]), timeout=30)

    chat = run(out["chat"]["id"], "chatcmpl-")
    assert out["chat"]["object"] == "chat.completion" and out["chat"]["text"] == chat.assistant_message.content != ""
    assert out["chat"]["usage"]["completion_tokens"] == chat.completion_tokens
    assert chat.sampling["presence_penalty"] == 0.5 and chat.sampling["top_k"] == 8 and chat.seed == 3
    [stream_id] = out["chat_stream"]["ids"]
    streamed = run(stream_id, "chatcmpl-")
    assert out["chat_stream"]["text"] == streamed.assistant_message.content != ""
    assert out["chat_stream"]["usage"]["completion_tokens"] == streamed.completion_tokens
    assert out["retry"]["first"] == out["retry"]["again"] and out["retry"]["same_text"]
    text = run(out["text"]["id"], "cmpl-")
    assert out["text"]["object"] == "text_completion" and out["text"]["text"] == text.assistant_message.content
    assert text.raw_prompt and text.prompt_snapshot == [{"role": "user", "content": "def add(a, b):"}]
    [text_stream_id] = out["text_stream"]["ids"]
    assert out["text_stream"]["text"] == run(text_stream_id, "cmpl-").assistant_message.content != ""
    assert len(out["text_stream"]["finish"]) == 1
    # chat, stream, the first of the retried pair (its retry admits nothing), text: 4 counted so far
    assert out["text"]["remaining_requests"] == "996"
    assert out["refused"] == {"status": 400, "param": "logit_bias", "code": "invalid_request",
                              "type": "invalid_request_error"}
    assert GenerationRun.objects.count() == 5  # the retry made no run
