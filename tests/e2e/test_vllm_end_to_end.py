"""The whole path on the real engine: API -> Celery -> vLLM worker -> Redis Stream -> SSE."""
import pytest

from chatsite.runs.stream_reader import read_reply
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
    assert read_reply(run["id"]).text == streamed  # the stream rebuilds to the same bytes


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
    """Cancel reaches the engine within a step: the request's KV blocks are freed at once."""
    import time

    import httpx

    from chatsite.pools.health import pool_workers
    from tests.conftest import VLLM_POOL

    def kv_use():
        return max((float(b["kv_cache_usage"]) for b in pool_workers(VLLM_POOL).values()), default=0.0)

    def poll(predicate, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = kv_use()
            if predicate(value):
                return value
            time.sleep(0.05)
        return kv_use()

    vllm_pool.max_output_tokens = 1000  # a reply long enough (seconds) to be cancelled mid-way
    vllm_pool.save(update_fields=["max_output_tokens"])
    chat = ChatFactory(tenant=tenant, owner=user, pool=vllm_pool)
    run = post_message(live_url, auth, chat.pk, content="Explain the for statement.", max_tokens=1000,
                       ignore_eos=True)
    url = live_url + run["events_url"]
    read_events(url, headers=auth, max_events=3, timeout=120)
    during = poll(lambda v: v > 0, 3.0)  # the next heartbeat with the request running
    cancelled_at = time.monotonic()
    assert httpx.post(f"{live_url}/api/runs/{run['id']}/cancel", headers=auth, timeout=10).status_code == 200
    evs = read_events(url, headers=auth, timeout=60)
    stopped_after = time.monotonic() - cancelled_at
    saved = wait_terminal(run["id"])
    after = poll(lambda v: v == 0, 3.0)
    print(f"KV cache use: {during:.4f} while running, {after:.4f} after cancel; "
          f"stream ended {stopped_after * 1000:.0f} ms after the cancel request")
    assert evs[-1].data["finish_reason"] == "cancelled" and saved.status == "cancelled"
    assert saved.completion_tokens < 1000
    assert during > 0 and after == 0
