"""The whole path on the real engine: API -> Celery -> vLLM worker -> Redis Stream -> SSE, with the
real flagship model (SmolLM2-135M-Instruct, served by the session's one vLLM worker)."""
import os

import pytest

from chatsite.runs.stream import log as stream_log
from tests.factories import ChatFactory
from tests.runs.helpers import post_message, wait_terminal
from tests.sse import read_events, text_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.vllm]


def test_reply_streams_from_vllm_and_saved_text_is_byte_identical(live_url, vllm_pool, tenant, user, auth):
    chat = ChatFactory(tenant=tenant, owner=user, pool=vllm_pool)
    run = post_message(live_url, auth, chat.pk, content="Explain the for statement.", max_tokens=64, seed=7)
    evs = read_events(live_url + run["events_url"], headers=auth, timeout=120)
    assert evs[-1].event == "done", evs[-1]
    streamed = text_of(evs)
    saved = wait_terminal(run["id"])
    assert saved.status == "completed"
    assert saved.assistant_message.content.encode() == streamed.encode()
    assert len(streamed) > 20  # a real reply, not an empty stream
    tokens = [e for e in evs if e.event == "token"]
    assert saved.completion_tokens == sum(e.data["n"] for e in tokens) == evs[-1].data["usage"]["completion_tokens"]
    assert saved.prompt_tokens > 0 and saved.ttft_ms is not None
    assert stream_log.read(run["id"]).text == streamed  # the stream rebuilds to the same bytes


def test_the_flagship_answers_a_question_with_its_own_chat_template(live_url, vllm_pool, tenant, user, auth):
    chat = ChatFactory(tenant=tenant, owner=user, pool=vllm_pool)
    run = post_message(live_url, auth, chat.pk, content="What is the capital of France?", max_tokens=48,
                       temperature=0.0)
    evs = read_events(live_url + run["events_url"], headers=auth, timeout=120)
    saved = wait_terminal(run["id"], timeout=120)
    assert evs[-1].event == "done" and saved.status == "completed"
    # greedy: the model's own answer, ended by its end-of-turn token (<|im_end|>), not by the length cap
    assert "Paris" in saved.assistant_message.content, saved.assistant_message.content
    assert saved.finish_reason == "stop" and saved.completion_tokens < 48
    assert "<|im" not in saved.assistant_message.content  # special tokens never reach the reply


def test_second_turn_and_resume_on_the_real_engine(live_url, vllm_pool, tenant, user, auth):
    chat = ChatFactory(tenant=tenant, owner=user, pool=vllm_pool)
    first = post_message(live_url, auth, chat.pk, content="What is a list?", max_tokens=40, seed=1)
    wait_terminal(first["id"], timeout=120)
    run = post_message(live_url, auth, chat.pk, content="And a tuple?", max_tokens=80, temperature=0.0,
                       ignore_eos=True)
    url = live_url + run["events_url"]
    part = read_events(url, headers=auth, max_events=4, timeout=120)
    rest = read_events(url, headers=auth, last_event_id=part[-1].id, timeout=120)
    saved = wait_terminal(run["id"], timeout=120)
    assert text_of(part) + text_of(rest) == saved.assistant_message.content
    assert saved.completion_tokens == 80 and saved.finish_reason == "length"
    assert saved.prompt_tokens > 0


def test_cancel_aborts_in_vllm_and_frees_its_kv_blocks(live_url, vllm_pool, tenant, user, auth):
    """Cancel reaches the engine within a step: the request leaves the engine and its
    KV blocks are freed at once, long before the reply would have ended.

    The cancel service is called in-process (the endpoint is tested with the fake
    engine and in the browser). On this shared 2-core machine a process can still be
    starved for seconds, so a cancel may land only after a reply ended by itself;
    such a try proves nothing and is repeated (at most four tries)."""
    import time

    from chatsite.pools.health import pool_workers
    from chatsite.runs.models import GenerationRun
    from chatsite.runs.services import run_cancel
    from tests.conftest import VLLM_POOL

    def engine():
        beats = pool_workers(VLLM_POOL).values()
        return (max((float(b["kv_cache_usage"]) for b in beats), default=0.0),
                sum(int(b["running"]) for b in beats))

    def poll(predicate, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = engine()
            if predicate(*value):
                return value
            time.sleep(0.05)
        return engine()

    vllm_pool.max_output_tokens = 1000  # a reply long enough (seconds) to be cancelled mid-way
    vllm_pool.save(update_fields=["max_output_tokens"])
    tries = []
    for attempt in range(4):
        chat = ChatFactory(tenant=tenant, owner=user, pool=vllm_pool)
        run = post_message(live_url, auth, chat.pk, content="Explain the for statement.", max_tokens=1000,
                           ignore_eos=True)
        url = live_url + run["events_url"]
        kv_during, running = poll(lambda kv, n: n > 0 and kv > 0, 60.0)  # heartbeats come every 0.2 s here
        cancelled_at = time.monotonic()
        run_cancel(run=GenerationRun.objects.get(pk=run["id"]))  # what POST /api/runs/{id}/cancel does
        evs = read_events(url, headers=auth, timeout=60)
        stopped_after = time.monotonic() - cancelled_at
        saved = wait_terminal(run["id"])
        kv_after, running_after = poll(lambda kv, n: kv == 0 and n == 0, 5.0)
        tries.append((saved.finish_reason, saved.completion_tokens, round(stopped_after * 1000)))
        if saved.finish_reason != "length":
            break
        assert saved.completion_tokens == 1000  # it ran to its end before the cancel landed: try again
    print(f"tries (finish reason, tokens, ms from cancel request to end of stream): {tries}; "
          f"KV cache use {kv_during:.4f} with {running} running, {kv_after:.4f} after the cancel")
    assert evs[-1].data["finish_reason"] == "cancelled" and saved.status == "cancelled"
    assert saved.completion_tokens < 1000
    assert running >= 1 and kv_during > 0 and kv_after == 0 and running_after == 0


def test_engine_core_runs_on_the_model_workers_cores(vllm_worker):
    """vLLM's engine core spins while it waits for each step's result; the worker binds
    it to the model's cores so the spin never takes a core from the platform."""
    import psutil

    from inference.engine_lifetime import engine_processes

    engine_cores, model_workers = engine_processes(vllm_worker.popen.pid)
    assert engine_cores and model_workers, "the vLLM worker should have an engine core and a model worker"
    model_cores = set().union(*(set(w.cpu_affinity()) for w in model_workers))
    if model_cores == set(range(psutil.cpu_count())):
        pytest.skip("the model may run on every core here: nothing to keep apart")
    for proc in engine_cores:
        for thread in proc.threads():
            assert set(os.sched_getaffinity(thread.id)) == model_cores, (thread.id, model_cores)
    assert "bound to the model's cores" in vllm_worker.log_text()
