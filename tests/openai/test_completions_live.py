"""The OpenAI-compatible API driven by the official `openai` package against the
live server: daphne, Celery workers with the deterministic fake engine, Redis."""
import threading

import httpx
import openai
import pytest

from chatsite.chats.models import Message
from chatsite.runs.models import GenerationRun
from tests.factories import PoolFactory
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What does a for loop do?"},
            {"role": "assistant", "content": "It repeats."},
            {"role": "user", "content": "Tell me more."}]


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    PoolFactory(name="small")
    return v1_client(live_url, api_key)


def _run(completion_id: str) -> GenerationRun:
    assert completion_id.startswith("chatcmpl-")
    return wait_terminal(int(completion_id.removeprefix("chatcmpl-")))


def test_non_streaming_returns_the_saved_text_and_usage(client):
    out = client.chat.completions.create(model="flagship", messages=QUESTION, max_tokens=30, temperature=0.5,
                                         top_p=0.9, seed=7, stop=["\n\n"])
    run = _run(out.id)
    assert out.object == "chat.completion" and out.model == "flagship" and len(out.choices) == 1
    assert out.choices[0].message.role == "assistant"
    assert out.choices[0].message.content == run.assistant_message.content != ""
    assert out.choices[0].finish_reason in ("stop", "length") and run.status == "completed"
    assert out.usage.prompt_tokens == run.prompt_tokens > 0
    assert out.usage.completion_tokens == run.completion_tokens > 0
    assert out.usage.total_tokens == run.prompt_tokens + run.completion_tokens
    assert run.source == "openai" and run.max_tokens == 30 and run.seed == 7
    assert run.sampling["temperature"] == 0.5 and run.sampling["top_p"] == 0.9 and run.sampling["stop"] == ["\n\n"]
    # The messages became the chat's history, and the prompt was built from them.
    assert [(m.role, m.content) for m in Message.objects.filter(chat=run.chat)] == [
        (m["role"], m["content"]) for m in QUESTION] + [("assistant", run.assistant_message.content)]
    assert run.prompt_snapshot == QUESTION


def test_streaming_chunks_spell_the_saved_text_and_usage_comes_last(client):
    stream = client.chat.completions.create(model="flagship", messages=QUESTION, max_tokens=40, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    run = _run(chunks[0].id)
    assert {c.id for c in chunks} == {chunks[0].id} and {c.object for c in chunks} == {"chat.completion.chunk"}
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == run.assistant_message.content != ""
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [run.finish_reason] and finishes[0] in ("stop", "length")
    assert chunks[-1].choices == [] and all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].usage.prompt_tokens == run.prompt_tokens > 0
    assert chunks[-1].usage.completion_tokens == run.completion_tokens > 0


def test_streaming_without_usage_sends_no_usage(client):
    chunks = list(client.chat.completions.create(model="small", messages=QUESTION[-1:], max_tokens=10, stream=True))
    run = _run(chunks[0].id)
    assert all(c.usage is None and len(c.choices) == 1 for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == run.assistant_message.content
    assert run.pool.name == "small"


def test_max_completion_tokens_and_ignore_eos(client):
    out = client.chat.completions.create(model="flagship", messages=QUESTION, max_completion_tokens=25,
                                         extra_body={"ignore_eos": True})
    run = _run(out.id)
    assert run.completion_tokens == 25 == out.usage.completion_tokens and out.choices[0].finish_reason == "length"


def test_same_seed_same_reply(client):
    a = client.chat.completions.create(model="flagship", messages=QUESTION, max_tokens=20, seed=3)
    b = client.chat.completions.create(model="flagship", messages=QUESTION, max_tokens=20, seed=3)
    assert a.id != b.id and a.choices[0].message.content == b.choices[0].message.content


def test_a_dropped_streaming_client_does_not_cancel_the_run(live_url, fake_workers, pool, api_key):
    body = {"model": "flagship", "messages": QUESTION, "max_tokens": 200, "stream": True,
            "ignore_eos": True}  # ~2 s at the fake engine's pace
    with httpx.stream("POST", f"{live_url}/v1/chat/completions", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {api_key}"}) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        run_id = int(resp.headers["x-run-id"])
        lines = resp.iter_lines()
        assert next(line for line in lines if line.startswith("data:"))
    run = wait_terminal(run_id)  # the connection is closed; the run goes on to the end
    assert run.status == "completed" and run.completion_tokens == 200


def test_engine_failure_is_an_openai_error(client):
    from inference.fake_backend import FAIL_MARKER

    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="flagship", max_tokens=40,
                                       messages=[{"role": "user", "content": f"please {FAIL_MARKER}"}])
    assert info.value.body["code"] == "engine_error" and info.value.body["type"] == "server_error"
    with pytest.raises(openai.APIError) as info:
        list(client.chat.completions.create(model="flagship", max_tokens=40, stream=True,
                                            messages=[{"role": "user", "content": f"again {FAIL_MARKER}"}]))
    assert info.value.body["code"] == "engine_error"
    runs = [wait_terminal(r.pk) for r in GenerationRun.objects.all()]
    assert [(r.status, r.source) for r in runs] == [("failed", "openai")] * 2


def test_models_list_and_retrieve(client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["flagship", "small"] and {m.object for m in models.data} == {"model"}
    assert client.models.retrieve("small").id == "small"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("nope")


def test_sdk_errors_carry_openai_shape(client):
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="nope", messages=QUESTION)
    assert info.value.body["code"] == "model_not_found" and info.value.body["param"] == "model"
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="flagship", messages=QUESTION, n=9)
    assert info.value.body["param"] == "n"
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="flagship", messages=[{"role": "narrator", "content": "Hi"}])
    assert info.value.body["param"] == "messages[0].role"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=client.base_url, api_key="csk_nope", max_retries=0).models.list()
    assert GenerationRun.objects.count() == 0


def test_concurrent_calls_each_get_their_own_run(client):
    results = {}

    def call(i):
        out = client.chat.completions.create(model="flagship", messages=QUESTION, max_tokens=15, seed=i)
        results[i] = out

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len({r.id for r in results.values()}) == 6
    for out in results.values():
        assert out.choices[0].message.content == _run(out.id).assistant_message.content


def test_sampling_knobs_reach_the_run_and_refusals_name_the_parameter(client):
    out = client.chat.completions.create(model="flagship", messages=QUESTION, max_tokens=10, presence_penalty=0.5,
                                         frequency_penalty=0.25, user="end-user-7",
                                         extra_body={"top_k": 12, "min_p": 0.05, "repetition_penalty": 1.15})
    run = _run(out.id)
    assert run.status == "completed" and out.choices[0].message.content == run.assistant_message.content
    assert {k: run.sampling[k] for k in ("presence_penalty", "frequency_penalty", "top_k", "min_p",
                                         "repetition_penalty")} == {
        "presence_penalty": 0.5, "frequency_penalty": 0.25, "top_k": 12, "min_p": 0.05, "repetition_penalty": 1.15}
    for refused in ({"logit_bias": {"7": 101}}, {"top_logprobs": 3}, {"tools": [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}):
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="flagship", messages=QUESTION, **refused)
        assert info.value.body["param"] == next(iter(refused))
    assert GenerationRun.objects.count() == 1
