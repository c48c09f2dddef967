"""Workers die, drain, outlive the broker's patience: every reply survives byte for byte."""
import random
import signal
import time

import httpx
import pytest

from chatsite.chats.models import QueuedMessage
from chatsite.runs import queues
from chatsite.runs.models import GenerationRun
from tests import stack
from tests.factories import ChatFactory
from tests.faults.client import follow, follow_in_thread
from tests.faults.conftest import POOL
from tests.faults.helpers import assert_nothing_lost, holder_of, post, replace_worker, stream_entries, wait_terminal
from tests.faults.hosts.probes import streamed

pytestmark = pytest.mark.django_db(transaction=True)


def wait_tokens(box_thread_result, n, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end and len(box_thread_result) < n:
        time.sleep(0.01)


@pytest.mark.parametrize("kill_after_tokens", [random.Random(7).randint(5, 150), random.Random(8).randint(5, 150)])
def test_sigkill_at_a_random_token_continues_on_another_worker(fault_stack, fault_redis_client, chat, auth,
                                                               kill_after_tokens, record_property):
    base = fault_stack["webs"][0]
    run = post(base, auth, chat.pk, max_tokens=300, ignore_eos=True)
    thread, box = follow_in_thread(run["events_url"], auth, base_urls=[base], watchdog=30)
    holder = holder_of(run["id"])
    while streamed(fault_redis_client, run["id"]) < kill_after_tokens:  # tokens, not entries (one holds several)
        time.sleep(0.005)
    killed_at = time.monotonic()
    fault_stack["workers"][holder].signal(signal.SIGKILL)
    thread.join(90)
    assert "error" not in box, box.get("error")
    result = box["result"]
    saved = assert_nothing_lost(fault_redis_client, run["id"], result.text)
    assert saved.status == "completed" and saved.completion_tokens == 300
    assert saved.attempt == 2 and saved.worker.split("@")[0] != holder
    stall = result.longest_stall()
    record_property("stall_seconds", round(stall, 2))
    print(f"SIGKILL after {kill_after_tokens} tokens: longest client stall {stall:.2f} s, "
          f"recovered {time.monotonic() - killed_at:.1f} s after the kill (run done)")
    assert stall < 15  # lease (4 s in tests) + sweep (1 s) + start: seconds, not Celery's hour
    replace_worker(fault_stack, holder)


def test_sigterm_drains_and_hands_the_rest_over(fault_stack, fault_redis_client, chat, auth):
    base = fault_stack["webs"][1]
    run = post(base, auth, chat.pk, max_tokens=400, ignore_eos=True)
    thread, box = follow_in_thread(run["events_url"], auth, base_urls=[base])
    holder = holder_of(run["id"])
    time.sleep(0.3)
    proc = fault_stack["workers"][holder]
    proc.signal(signal.SIGTERM)  # warm shutdown: drain for CHATSITE_DRAIN_SECONDS=1, then hand back
    proc.popen.wait(60)
    thread.join(90)
    result = box["result"]
    saved = assert_nothing_lost(fault_redis_client, run["id"], result.text)
    assert saved.status == "completed" and saved.completion_tokens == 400 and saved.attempt == 2
    assert "drain" in proc.log_text()
    # billed once: what attempt 1 streamed is completion, not prompt too (attempt 2's engine read it)
    alone = post(base, auth, ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=chat.pool).pk, max_tokens=5)
    assert saved.prompt_tokens == wait_terminal(alone["id"]).prompt_tokens > 0
    replace_worker(fault_stack, holder)


def test_a_run_longer_than_the_visibility_timeout_is_generated_once(fault_stack, fault_redis_client, chat, auth):
    # restart both workers with a 2-second visibility timeout; the run takes ~4 s
    env = {**fault_stack["env"], "CHATSITE_VISIBILITY_TIMEOUT": "2"}
    for name in ("fa", "fb"):
        fault_stack["workers"][name].stop(timeout=10)
        fault_stack["workers"][name] = stack.start_worker(env, pool=POOL, name=name)
    try:
        run = post(fault_stack["webs"][0], auth, chat.pk, max_tokens=400, ignore_eos=True)
        result = follow(run["events_url"], auth, base_urls=fault_stack["webs"])
        time.sleep(3)  # room for a late duplicate delivery to act
        saved = assert_nothing_lost(fault_redis_client, run["id"], result.text)
        assert saved.attempt == 1 and saved.completion_tokens == 400
    finally:
        for name in ("fa", "fb"):
            replace_worker(fault_stack, name)


def test_web_process_killed_while_serving_sse_client_resumes_on_another(fault_stack, fault_redis_client, chat, auth):
    extra, url = stack.start_web(fault_stack["env"])
    run = post(url, auth, chat.pk, max_tokens=300, ignore_eos=True)
    thread, box = follow_in_thread(run["events_url"], auth, base_urls=[url, fault_stack["webs"][0]])
    time.sleep(0.8)
    extra.signal(signal.SIGKILL)
    thread.join(60)
    result = box["result"]
    assert result.reconnects >= 1
    assert_nothing_lost(fault_redis_client, run["id"], result.text)
    extra.stop()


def test_cancel_racing_a_natural_finish_ends_once_and_consistently(fault_stack, fault_redis_client, chat, auth):
    base = fault_stack["webs"][0]
    outcomes = set()
    for i in range(12):
        run = post(base, auth, chat.pk, max_tokens=20, ignore_eos=True)  # ~0.2 s of generation
        time.sleep(0.02 * i)  # cancel before, during and after the finish
        httpx.post(f"{base}/api/runs/{run['id']}/cancel", headers=auth, timeout=10)
        saved = assert_nothing_lost(fault_redis_client, run["id"])
        reason = stream_entries(fault_redis_client, run["id"])[-1].finish_reason
        assert (saved.status, saved.finish_reason) in {("cancelled", "cancelled"), ("completed", "length")}
        assert saved.finish_reason == reason
        outcomes.add(saved.status)
    assert outcomes == {"cancelled", "completed"}


def test_a_hundred_random_disconnects_in_one_long_reply(fault_stack, fault_redis_client, chat, auth):
    base = fault_stack["webs"][0]
    run = post(base, auth, chat.pk, max_tokens=2000, ignore_eos=True)  # ~20 s at the fake's pace
    # hang up after 1 or 2 more events, a hundred times (a busy writer may put several tokens in one event)
    rng, points, at = random.Random(11), set(), 0
    for _ in range(100):
        at += rng.randint(1, 2)
        points.add(at)
    result = follow(run["events_url"], auth, drop_after=points, base_urls=fault_stack["webs"])
    assert len(result.events) > max(points) and result.reconnects >= 100
    saved = assert_nothing_lost(fault_redis_client, run["id"], result.text)
    assert saved.completion_tokens == 2000


def test_three_devices_at_start_mid_run_and_after_the_end_see_identical_text(fault_stack, fault_redis_client,
                                                                             chat, auth):
    base = fault_stack["webs"][0]
    run = post(base, auth, chat.pk, max_tokens=200, ignore_eos=True)
    t1, b1 = follow_in_thread(run["events_url"], auth, base_urls=[base])
    time.sleep(1.0)
    t2, b2 = follow_in_thread(run["events_url"], auth, base_urls=[fault_stack["webs"][1]])
    t1.join(60)
    t2.join(60)
    late = follow(run["events_url"], auth, base_urls=[base])
    assert_nothing_lost(fault_redis_client, run["id"], b1["result"].text, b2["result"].text, late.text)


# --- queued messages (chatsite.runs.services.queued): durable, none lost, none twice ---

def _queue(base, auth, chat_id, content):
    resp = httpx.post(f"{base}/api/chats/{chat_id}/messages/", headers=auth, timeout=30,
                      json={"content": content, "queue": True, "max_tokens": 20, "ignore_eos": True})
    assert resp.status_code == 202 and resp.json()["queued_message"]["state"] == "queued", resp.text
    return resp.json()["queued_message"]


def _all_started_once(fault_redis_client, chat, first_run_id, queued: list[dict], timeout=90):
    """Each queued message started exactly once, in order, one after the other's end, and
    every reply (the first's included) is whole."""
    end = time.monotonic() + timeout
    while QueuedMessage.objects.filter(chat=chat, state="queued").exists() and time.monotonic() < end:
        time.sleep(0.1)
    items = list(QueuedMessage.objects.filter(pk__in=[q["id"] for q in queued]).order_by("position", "id"))
    assert [(i.content, i.state) for i in items] == [(q["content"], "started") for q in queued]
    runs = [assert_nothing_lost(fault_redis_client, first_run_id)] + [
        assert_nothing_lost(fault_redis_client, i.run_id) for i in items]
    assert [r.status for r in runs] == ["completed"] * len(runs)
    for before, after in zip(runs, runs[1:]):
        assert before.finished_at <= after.queued_at  # one at a time, in order
        assert after.user_message.parent_id == before.assistant_message_id
    assert GenerationRun.objects.filter(chat=chat).count() == len(runs)  # none twice
    for q in queued:
        assert GenerationRun.objects.filter(chat=chat, user_message__content=q["content"]).count() == 1


def test_queued_messages_survive_a_worker_killed_mid_reply(fault_stack, fault_redis_client, chat, auth):
    base = fault_stack["webs"][0]
    run = post(base, auth, chat.pk, max_tokens=300, ignore_eos=True)
    queued = [_queue(base, auth, chat.pk, text) for text in ("queued one", "queued two")]
    holder = holder_of(run["id"])
    while streamed(fault_redis_client, run["id"]) < 50:
        time.sleep(0.005)
    fault_stack["workers"][holder].signal(signal.SIGKILL)
    _all_started_once(fault_redis_client, chat, run["id"], queued)
    assert GenerationRun.objects.get(pk=run["id"]).attempt == 2  # the reply carried on elsewhere
    replace_worker(fault_stack, holder)


def test_a_send_now_whose_worker_dies_before_the_stop_runs_its_message_once_after_the_reply_saved(
        fault_stack, fault_redis_client, chat, auth):
    # The message is admitted before the stop is written (its run waits for the reply's save:
    # workers.steered); the reply's worker is paused, then killed, before it can write it.
    base = fault_stack["webs"][0]
    run = post(base, auth, chat.pk, max_tokens=300, ignore_eos=True)
    item = _queue(base, auth, chat.pk, "sent now")
    holder = holder_of(run["id"])
    while streamed(fault_redis_client, run["id"]) < 30:
        time.sleep(0.005)
    fault_stack["workers"][holder].signal(signal.SIGSTOP)
    sent = httpx.post(f"{base}/api/chats/{chat.pk}/queue/{item['id']}/send-now", headers=auth, timeout=30)
    assert sent.status_code == 202 and sent.json()["state"] == "started", sent.text
    fault_stack["workers"][holder].signal(signal.SIGKILL)
    steered_id = QueuedMessage.objects.get(pk=item["id"]).run_id
    steered = wait_terminal(steered_id, timeout=90)
    stopped = assert_nothing_lost(fault_redis_client, run["id"])
    assert stopped.status == "cancelled" and stopped.finish_reason == "interrupted"
    assert 30 <= stopped.completion_tokens < 300 and stopped.assistant_message.content
    assert steered.status == "completed" and steered.user_message.parent_id == stopped.assistant_message_id
    # Its prompt was built from the reply as saved, taken over and ended elsewhere after the kill.
    assert steered.prompt_snapshot[-2:] == [{"role": "assistant", "content": stopped.assistant_message.content},
                                            {"role": "user", "content": "sent now"}]
    assert steered.worker.split("@")[0] != holder
    assert GenerationRun.objects.filter(chat=chat).count() == 2  # none twice
    replace_worker(fault_stack, holder)


def test_a_wake_up_a_paused_worker_took_is_sent_again_once_that_worker_dies(fault_stack, fault_redis_client,
                                                                              chat, auth):
    # Redis hands a message to a connection blocked in its BRPOP even while that worker is paused;
    # killed before kombu records it as unacknowledged, the message is gone (no visibility timeout
    # brings it back), and a run waits in the fair queue with nothing to wake a worker for it.
    paused, live = list(fault_stack["workers"])
    waiting = _wake_up_taken_by_a_paused_worker(fault_stack, fault_redis_client, chat, auth, paused)
    fault_stack["workers"][paused].signal(signal.SIGKILL)
    killed_at = time.monotonic()
    served = wait_terminal(waiting, timeout=60)  # the sweep's new wake-up, once the run waited UNWOKEN_GRACE
    assert served.status == "completed" and served.attempt == 1 and served.worker.split("@")[0] == live
    print(f"a lost wake-up: its run served {time.monotonic() - killed_at:.1f} s after the kill, "
          f"{(served.finished_at - served.queued_at).total_seconds():.1f} s after it was queued")
    replace_worker(fault_stack, paused)


def _wake_up_taken_by_a_paused_worker(fault_stack, fault_redis_client, chat, auth, paused: str) -> int:
    """A run left waiting in the fair queue, its wake-up taken by worker `paused` (paused here):
    two runs in new chats (no pin: the pool's queue) until one waits with no message left in the
    queue, and the live worker idle. A worker paused between two of its BRPOPs takes none: it
    is let go and paused again."""
    base, queue = fault_stack["webs"][0], queues.pool_queue(POOL, GenerationRun.Tier.INTERACTIVE)
    for _ in range(5):
        fault_stack["workers"][paused].signal(signal.SIGSTOP)
        ids = [post(base, auth, ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=chat.pool).pk,
                    max_tokens=5)["id"] for _ in range(2)]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            states = dict(GenerationRun.objects.filter(pk__in=ids).values_list("pk", "status"))
            if sorted(states.values()) == ["completed", "queued"] and not fault_redis_client.llen(queue):
                waiting = next(pk for pk, status in states.items() if status == "queued")
                time.sleep(1)  # not a wake-up the live worker took a moment ago and is yet to claim
                if GenerationRun.objects.get(pk=waiting).status == "queued":
                    return waiting
            if sorted(states.values()) == ["completed", "completed"]:
                break
            time.sleep(0.05)
        fault_stack["workers"][paused].signal(signal.SIGCONT)
        time.sleep(0.5)
    raise AssertionError(f"worker {paused}, paused five times, never took a message")


def test_queued_messages_survive_the_web_process_that_took_them(fault_stack, fault_redis_client, chat, auth):
    extra, url = stack.start_web(fault_stack["env"])
    run = post(url, auth, chat.pk, max_tokens=300, ignore_eos=True)
    queued = [_queue(url, auth, chat.pk, text) for text in ("after the restart", "and then this")]
    extra.signal(signal.SIGKILL)  # the web process that queued them is gone; another serves the user
    listed = httpx.get(f"{fault_stack['webs'][1]}/api/chats/{chat.pk}/queue/", headers=auth, timeout=30)
    assert [m["content"] for m in listed.json()["results"]] == ["after the restart", "and then this"]
    _all_started_once(fault_redis_client, chat, run["id"], queued)
    extra.stop()
