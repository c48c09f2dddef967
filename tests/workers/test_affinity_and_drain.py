"""Two workers of one pool: chats stick to their worker; a drain hands runs over."""
import time

import pytest

from chatsite import redis_keys
from chatsite.celery import app
from chatsite.redis_client import get_redis
from chatsite.runs.stream import codec, log
from tests import stack
from tests.runs.helpers import post_message, wait_terminal
from tests.sse import read_events, text_of
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def second_worker(start_flagship_worker):
    proc = start_flagship_worker("fake-flagship-2")
    time.sleep(2)  # let its first heartbeats land
    return proc


@pytest.mark.slow
def test_turns_of_a_chat_stay_on_one_worker(live_url, second_worker, chat, auth):
    workers = []
    for i in range(4):
        run = post_message(live_url, auth, chat.pk, content=f"turn {i}", max_tokens=5)
        workers.append(wait_terminal(run["id"]).worker)
    assert len(set(workers)) == 1
    assert get_redis().get(redis_keys.chat_affinity(chat.pk)) == workers[0]  # the chat is pinned to it


def test_a_completions_choices_all_run_on_one_worker(live_url, second_worker, pool, auth):
    import httpx

    for attempt in range(3):  # each call is a new chat, pinned afresh
        resp = httpx.post(f"{live_url}/v1/chat/completions", headers=auth, timeout=60, json={
            "model": "flagship", "messages": [{"role": "user", "content": f"call {attempt}"}], "max_tokens": 5,
            "n": 4})
        assert resp.status_code == 200, resp.text
        runs = [wait_terminal(int(i)) for i in resp.headers["x-run-ids"].split(",")]
        assert len({r.worker for r in runs}) == 1, [r.worker for r in runs]


@pytest.fixture
def drained(stack_env, fake_workers):
    """The workers a test drains; a drained worker takes nothing more, so the session's own
    fake-flagship worker, if it was one, is started again for the tests that follow."""
    names: list[str] = []
    yield names
    for i, proc in enumerate(fake_workers):
        if proc.name == "worker-fake-flagship" and any(n.split("@")[0] == "fake-flagship" for n in names):
            proc.stop()
            fake_workers[i] = stack.start_worker({**stack_env, "CHATSITE_ENGINE": "fake",
                                                  "CHATSITE_FAKE_STEP_SECONDS": "0.01"},
                                                 pool="flagship", name="fake-flagship")


@pytest.mark.slow
def test_drain_hands_a_running_reply_to_another_worker_without_a_break(live_url, second_worker, chat, auth, drained):
    run = post_message(live_url, auth, chat.pk, max_tokens=400, ignore_eos=True)  # ~4 s
    url = live_url + run["events_url"]
    first = read_events(url, headers=auth, max_events=5)
    holder = wait_for_worker(run["id"])
    drained.append(holder)
    reply = app.control.broadcast("drain", arguments={"deadline": 0.5}, destination=[holder], reply=True, timeout=5)
    assert reply and "ok" in list(reply[0].values())[0]
    rest = read_events(url, headers=auth, last_event_id=first[-1].id, timeout=60)
    saved = wait_terminal(run["id"])
    assert saved.status == "completed" and saved.completion_tokens == 400
    assert saved.attempt == 2 and saved.worker != holder
    assert text_of(first) + text_of(rest) == saved.assistant_message.content
    tokens = [e for e in log.entries(run["id"]) if e.type == codec.TOKEN]
    assert [e.seq for e in tokens] == sorted(e.seq for e in tokens)
    assert {e.attempt for e in tokens} == {1, 2}
    # the drained worker takes nothing new: the chat's next turn goes to the other one
    nxt = post_message(live_url, auth, chat.pk, content="next", max_tokens=5)
    assert wait_terminal(nxt["id"]).worker != holder


@pytest.fixture
def third_worker(stack_env, second_worker, pool):
    """One more worker of the pool: the drain test before may have left fake-flagship-2
    draining, and the drained worker's choices need a worker to go on."""
    proc = stack.start_worker({**stack_env, "CHATSITE_ENGINE": "fake", "CHATSITE_FAKE_STEP_SECONDS": "0.01"},
                              pool="flagship", name="fake-flagship-3")
    yield proc
    proc.stop()


@pytest.mark.slow
def test_a_drain_hands_every_choice_of_a_completion_over_without_a_break(live_url, third_worker, pool, api_key,
                                                                         drained):
    import openai

    from chatsite.runs.models import GenerationRun

    client = v1_client(live_url, api_key)
    stream = client.chat.completions.create(model="flagship", messages=[{"role": "user", "content": "drain me"}],
                                            max_tokens=400, n=2, stream=True, extra_body={"ignore_eos": True})
    texts, holder = {0: "", 1: ""}, None
    for chunk in stream:
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
        if holder is None and all(texts.values()):  # both choices are streaming: drain their worker
            holder = wait_for_worker(int(chunk.id.removeprefix("chatcmpl-")))
            drained.append(holder)
            reply = app.control.broadcast("drain", arguments={"deadline": 0.5}, destination=[holder], reply=True,
                                          timeout=5)
            assert reply and "ok" in list(reply[0].values())[0]
    assert holder is not None
    first = int(chunk.id.removeprefix("chatcmpl-"))
    others = GenerationRun.objects.filter(choice_of=first).order_by("choice_index").values_list("pk", flat=True)
    runs = [wait_terminal(pk) for pk in [first, *others]]
    assert [texts[i] for i in (0, 1)] == [r.assistant_message.content for r in runs]
    assert [(r.status, r.completion_tokens, r.attempt) for r in runs] == [("completed", 400, 2)] * 2
    assert all(r.worker != holder for r in runs)


def wait_for_worker(run_id, timeout=10):
    from chatsite.runs.models import GenerationRun

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        worker = GenerationRun.objects.get(pk=run_id).worker
        if worker:
            return worker
        time.sleep(0.05)
    raise TimeoutError


def test_inspect_engine_stats_reports_each_worker(second_worker, stack_env):
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "celery", "-A", "chatsite", "inspect", "engine_stats", "--json",
                          "--timeout", "3"], env=stack_env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    replies = json.loads(out.stdout.strip().splitlines()[-1])
    stats = {name: s for name, s in replies.items() if s.get("engine", True) is not None}
    assert any(name.startswith("fake-flagship-2@") for name in stats)
    assert all({"pool", "kv_cache_usage", "running", "waiting", "ready"} <= s.keys() for s in stats.values())
    fakes = {name: s for name, s in stats.items() if name.startswith("fake-")}  # others: the session's vLLM worker
    assert all(s["pool"] == name.split("@")[0].split("-")[1] and s["ready"] == 1 for name, s in fakes.items()), fakes
