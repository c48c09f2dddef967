"""`n` choices on /v1/chat/completions and /v1/completions, with the official `openai`
package against the live stack (daphne, fake-engine workers, Redis): one run per
choice, admitted together, read back together."""
import time

import httpx
import openai
import pytest

from chatsite.chats.models import Chat, Message
from chatsite.quotas.models import TenantQuota, TenantUsage
from chatsite.runs.models import GenerationRun
from chatsite.tenancy.services import api_key_create
from tests.factories import TenantFactory, UserFactory
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

ASK = {"model": "flagship", "messages": [{"role": "user", "content": "What does a for loop do?"}], "max_tokens": 30}


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    return v1_client(live_url, api_key)


@pytest.fixture(autouse=True)
def _saved_before_the_flush(transactional_db):
    """A streamed call ends when its choices' streams do; their workers may still be
    saving them. Wait for that, so the flush after the test does not race n finalizes."""
    yield
    end = time.monotonic() + 30
    while GenerationRun.objects.filter(status__in=["queued", "running"]).exists() and time.monotonic() < end:
        time.sleep(0.05)


def _runs(completion_id: str) -> list[GenerationRun]:
    first = int(completion_id.removeprefix("chatcmpl-").removeprefix("cmpl-"))
    ids = [first] + list(GenerationRun.objects.filter(choice_of=first).order_by("choice_index")
                         .values_list("pk", flat=True))
    return [wait_terminal(pk) for pk in ids]


def _streamed(chunks) -> tuple[dict[int, str], dict[int, list[str]]]:
    """Each choice's text and finish reasons, from a chat stream's chunks."""
    texts, finishes = {}, {}
    for c in chunks:
        for choice in c.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                finishes.setdefault(choice.index, []).append(choice.finish_reason)
    return texts, finishes


def test_three_choices_are_distinct_indexed_and_their_usage_summed(client):
    out = client.chat.completions.create(**ASK, n=3, seed=11)
    runs = _runs(out.id)
    assert [c.index for c in out.choices] == [0, 1, 2] and len(runs) == 3
    texts = [c.message.content for c in out.choices]
    assert texts == [r.assistant_message.content for r in runs] and len(set(texts)) == 3 and all(texts)
    assert [c.finish_reason for c in out.choices] == [r.finish_reason for r in runs]
    assert out.usage.prompt_tokens == runs[0].prompt_tokens > 0  # the prompt counted once
    assert out.usage.completion_tokens == sum(r.completion_tokens for r in runs)
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens
    # One chat; the choices are versions (siblings) of the same turn, each with its own run and seed.
    assert Chat.objects.count() == 1 and GenerationRun.objects.count() == 3
    asked = runs[0].user_message
    assert {r.user_message_id for r in runs} == {asked.pk}
    assert list(Message.objects.filter(parent=asked).order_by("pk").values_list("pk", flat=True)) == [
        r.assistant_message_id for r in runs]
    assert [r.choice_index for r in runs] == [0, 1, 2] and [r.choice_of_id for r in runs] == [None, runs[0].pk,
                                                                                            runs[0].pk]
    assert runs[0].seed == 11 and len({r.seed for r in runs}) == 3
    assert runs[0].chat.current_leaf_id == runs[0].assistant_message_id


def test_the_usage_report_counts_a_completions_prompt_once(client, live_url, api_key):
    out = client.chat.completions.create(**ASK, n=3)
    _runs(out.id)
    report = httpx.get(f"{live_url}/api/usage/", headers={"Authorization": f"Bearer {api_key}"}, timeout=10).json()
    assert report["total_tokens"] == out.usage.total_tokens
    assert report["models"][0]["prompt_tokens"] == out.usage.prompt_tokens and report["models"][0]["runs"] == 3


def test_a_stream_of_three_choices_spells_what_a_call_with_the_same_seed_returns(client):
    whole = client.chat.completions.create(**ASK, n=3, seed=5)
    chunks = list(client.chat.completions.create(**ASK, n=3, seed=5, stream=True,
                                                 stream_options={"include_usage": True}))
    runs = _runs(chunks[0].id)
    texts, finishes = _streamed(chunks)
    assert texts == {c.index: c.message.content for c in whole.choices}
    assert finishes == {i: [r.finish_reason] for i, r in enumerate(runs)}  # one finish per choice
    roles = [c.choices[0].index for c in chunks if c.choices and c.choices[0].delta.role == "assistant"]
    assert roles == [0, 1, 2] and {c.id for c in chunks} == {chunks[0].id}
    # the choices' chunks are interleaved as their tokens come, not one choice after another
    order = [c.choices[0].index for c in chunks if c.choices and c.choices[0].delta.content]
    assert order != sorted(order)
    assert chunks[-1].choices == [] and all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens == sum(r.completion_tokens
                                                                                      for r in runs)


def test_the_same_seed_gives_the_same_choices_and_the_first_is_n_1s(client):
    a = client.chat.completions.create(**ASK, n=2, seed=8)
    b = client.chat.completions.create(**ASK, n=2, seed=8)
    one = client.chat.completions.create(**ASK, seed=8)
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]
    assert one.choices[0].message.content == a.choices[0].message.content != a.choices[1].message.content
    unseeded = client.chat.completions.create(**ASK, n=2)
    assert unseeded.choices[0].message.content != unseeded.choices[1].message.content


def test_text_completions_take_n_too(client):
    body = {"model": "flagship", "prompt": "def add(a, b):", "max_tokens": 20, "seed": 2}
    out = client.completions.create(**body, n=2)
    assert [c.index for c in out.choices] == [0, 1] and out.id.startswith("cmpl-")
    runs = _runs(out.id)
    assert [c.text for c in out.choices] == [r.assistant_message.content for r in runs]
    assert all(r.raw_prompt for r in runs)
    chunks = list(client.completions.create(**body, n=2, stream=True, stream_options={"include_usage": True}))
    texts = {}
    for c in chunks:
        for choice in c.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
    assert texts == {0: out.choices[0].text, 1: out.choices[1].text}
    assert chunks[-1].usage.completion_tokens == out.usage.completion_tokens


def test_an_idempotent_retry_returns_the_same_choices_and_makes_no_runs(client, live_url, api_key):
    key = {"Idempotency-Key": "choices-1"}
    first = client.chat.completions.create(**ASK, n=3, extra_headers=key)
    again = client.chat.completions.create(**ASK, n=3, extra_headers=key)
    assert again.id == first.id and again.choices == first.choices and again.usage == first.usage
    raw = httpx.post(f"{live_url}/v1/chat/completions", json={**ASK, "n": 3}, timeout=30,
                     headers={"Authorization": f"Bearer {api_key}", **key})
    assert raw.status_code == 200 and raw.headers["idempotent-replayed"] == "true"
    assert raw.headers["x-run-ids"] == ",".join(str(r.pk) for r in _runs(first.id))
    assert GenerationRun.objects.count() == 3 and Chat.objects.count() == 1


def test_a_retry_of_a_stream_replays_the_same_choices(client, live_url, api_key):
    key = {"Idempotency-Key": "choices-2"}
    first = _streamed(list(client.chat.completions.create(**ASK, n=3, stream=True, extra_headers=key)))
    again = _streamed(list(client.chat.completions.create(**ASK, n=3, stream=True, extra_headers=key)))
    assert again == first and len(first[0]) == 3
    assert GenerationRun.objects.count() == 3
    other = httpx.post(f"{live_url}/v1/chat/completions", json={**ASK, "n": 2, "stream": True}, timeout=30,
                       headers={"Authorization": f"Bearer {api_key}", **key})
    assert other.status_code == 409 and other.json()["error"]["code"] == "idempotency_key_reused"
    assert GenerationRun.objects.count() == 3


@pytest.mark.parametrize("n", [9, 0, -1, 2.5, True, "3"])
def test_n_out_of_range_is_refused_by_name(client, n):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(**ASK, n=n)
    assert info.value.body["param"] == "n" and "1 to 8" in info.value.body["message"]
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="flagship", prompt="x = ", n=n)
    assert info.value.body["param"] == "n"
    assert GenerationRun.objects.count() == 0 and Message.objects.count() == 0


def test_a_budget_too_small_for_n_times_max_tokens_refuses_the_whole_call(client, tenant):
    TenantQuota.objects.create(tenant=tenant, token_budget=150)  # the prompt is ~15 tokens
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(**{**ASK, "max_tokens": 50}, n=3)
    assert info.value.body["code"] == "budget_exhausted" and "n=3" in info.value.body["message"]
    assert GenerationRun.objects.count() == 0 and Chat.objects.count() == 0
    assert not TenantUsage.objects.filter(tenant=tenant, reserved_tokens__gt=0).exists()
    assert TenantUsage.objects.get(tenant=tenant).refused_requests == 1  # counted outside the call's rollback
    out = client.chat.completions.create(**{**ASK, "max_tokens": 50}, n=2, extra_body={"ignore_eos": True})
    runs = _runs(out.id)
    # Each choice has its whole reservation. (A budget cap counts the real prompt, which the chat
    # template makes a few tokens longer than admission's estimate: a reply may stop those few short.)
    assert [r.status for r in runs] == ["completed"] * 2 and min(r.completion_tokens for r in runs) > 40
    usage = TenantUsage.objects.get(tenant=tenant)
    assert usage.reserved_tokens == 0
    assert usage.used_tokens == out.usage.total_tokens == runs[0].prompt_tokens + sum(
        r.completion_tokens for r in runs)  # the prompt counted once


def test_the_rate_limit_counts_a_call_for_several_choices_once(client, tenant):
    TenantQuota.objects.create(tenant=tenant, requests_per_minute=2)
    if 60 - time.time() % 60 < 15:  # the per-minute counter would renew between the calls
        time.sleep(60 - time.time() % 60 + 0.5)
    out = client.chat.completions.create(**ASK, n=4)
    assert len(out.choices) == 4
    client.chat.completions.create(**ASK)
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(**ASK, n=2)
    assert GenerationRun.objects.count() == 5


def test_a_concurrency_limit_counts_every_choice(client, tenant):
    TenantQuota.objects.create(tenant=tenant, max_concurrent_runs=2)
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(**ASK, n=3)
    assert info.value.body["code"] == "concurrency_limit" and GenerationRun.objects.count() == 0
    assert len(client.chat.completions.create(**ASK, n=2).choices) == 2


def test_cancelling_one_choice_stops_only_it(client, live_url, api_key):
    body = {**ASK, "max_tokens": 300, "n": 2, "stream": True, "ignore_eos": True}  # ~3 s at the fake pace
    auth = {"Authorization": f"Bearer {api_key}"}
    with httpx.stream("POST", f"{live_url}/v1/chat/completions", json=body, headers=auth, timeout=30) as resp:
        first, second = (int(i) for i in resp.headers["x-run-ids"].split(","))
        assert resp.headers["x-run-id"] == str(first)
        lines = resp.iter_lines()
        assert next(line for line in lines if '"content": "' in line and '"content": ""' not in line)
        cancel = httpx.post(f"{live_url}/api/runs/{second}/cancel", headers=auth, timeout=10)
        assert cancel.status_code == 200, cancel.text
        rest = [line for line in lines if line]
    finishes = [line for line in rest if '"finish_reason": "' in line]
    assert len(finishes) == 2 and rest[-1] == "data: [DONE]"
    assert '"index": 1, "delta": {}, "logprobs": null, "finish_reason": "stop"' in finishes[0]  # the cancel
    a, b = wait_terminal(first), wait_terminal(second)
    assert a.status == "completed" and a.completion_tokens == 300
    assert b.status == "cancelled" and b.completion_tokens < 300


def test_a_dropped_client_leaves_every_choice_running(live_url, fake_workers, pool, api_key):
    body = {**ASK, "max_tokens": 150, "n": 3, "stream": True, "ignore_eos": True}
    with httpx.stream("POST", f"{live_url}/v1/chat/completions", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {api_key}"}) as resp:
        ids = [int(i) for i in resp.headers["x-run-ids"].split(",")]
        assert next(line for line in resp.iter_lines() if line.startswith("data:"))
    runs = [wait_terminal(pk) for pk in ids]
    assert [(r.status, r.completion_tokens) for r in runs] == [("completed", 150)] * 3


def test_another_tenants_key_never_reaches_a_tenants_choices(client, live_url):
    mine = client.chat.completions.create(**ASK, n=3, extra_headers={"Idempotency-Key": "shared"})
    other_tenant = TenantFactory()
    _, secret = api_key_create(user=UserFactory(tenant=other_tenant), tenant=other_tenant, name="b")
    other = v1_client(live_url, secret)
    theirs = other.chat.completions.create(**ASK, n=3, extra_headers={"Idempotency-Key": "shared"})
    assert theirs.id != mine.id and GenerationRun.objects.count() == 6
    assert {r.tenant_id for r in _runs(theirs.id)} == {other_tenant.pk}
    for run in _runs(mine.id):
        got = httpx.get(f"{live_url}/api/runs/{run.pk}/", headers={"Authorization": f"Bearer {secret}"}, timeout=10)
        assert got.status_code == 404


def test_racing_retries_for_several_choices_share_one_set_of_runs(live_url, fake_workers, pool, api_key):
    from concurrent.futures import ThreadPoolExecutor

    def call(_):
        return httpx.post(f"{live_url}/v1/chat/completions", json={**ASK, "n": 3}, timeout=60,
                          headers={"Authorization": f"Bearer {api_key}", "Idempotency-Key": "race-n"})

    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(call, range(4)))
    assert [r.status_code for r in results] == [200] * 4, [r.text for r in results]
    assert len({r.json()["id"] for r in results}) == 1 and len({r.headers["x-run-ids"] for r in results}) == 1
    assert len({tuple(c["message"]["content"] for c in r.json()["choices"]) for r in results}) == 1
    assert GenerationRun.objects.count() == 3 and Chat.objects.count() == 1


def test_a_failed_choice_is_the_calls_error(client):
    from inference.fake_backend import FAIL_MARKER

    ask = {**ASK, "messages": [{"role": "user", "content": f"please {FAIL_MARKER}"}], "n": 2}
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(**ask)
    assert info.value.body["code"] == "engine_error"
    with pytest.raises(openai.APIError) as info:
        list(client.chat.completions.create(**ask, stream=True))
    assert info.value.body["code"] == "engine_error"
    assert {wait_terminal(r.pk).status for r in GenerationRun.objects.all()} == {"failed"}


def test_a_replay_after_the_streams_expired_reads_every_choice_from_postgres(client):
    from chatsite import redis_keys
    from chatsite.redis_client import get_redis

    key = {"Idempotency-Key": "choices-expired"}
    chunks = list(client.chat.completions.create(**ASK, n=3, stream=True, stream_options={"include_usage": True},
                                                 extra_headers=key))
    runs = _runs(chunks[0].id)
    get_redis().delete(*[redis_keys.run_stream(r.pk) for r in runs])  # past their TTL
    again = list(client.chat.completions.create(**ASK, n=3, stream=True, stream_options={"include_usage": True},
                                                extra_headers=key))
    assert _streamed(again) == _streamed(chunks)
    assert _streamed(again)[0] == {i: r.assistant_message.content for i, r in enumerate(runs)}
    assert again[-1].usage == chunks[-1].usage
    assert GenerationRun.objects.count() == 3
