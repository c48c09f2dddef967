"""logprobs and top_logprobs through the official `openai` package against the live
stack (fake engine): the shapes OpenAI's SDK parses, streamed and not, and the same
figures read back after the Redis stream is gone."""
import math

import httpx
import openai
import pytest

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs.models import GenerationRun
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

ASK = [{"role": "user", "content": "What does a for loop do?"}]
PROMPT = "def fibonacci(n):\n    "


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    return v1_client(live_url, api_key)


def _run(any_id: str) -> GenerationRun:
    return wait_terminal(int(any_id.rsplit("-", 1)[1]))


def _check_token(item, top_n: int):
    assert item.logprob <= 0 and math.exp(item.logprob) <= 1
    assert item.bytes == list(item.token.encode())
    assert len(item.top_logprobs) == top_n
    figures = [t.logprob for t in item.top_logprobs]
    assert figures == sorted(figures, reverse=True) and all(f <= 0 for f in figures)
    assert all(t.bytes == list(t.token.encode()) for t in item.top_logprobs)
    if item.token in {t.token for t in item.top_logprobs}:  # the sampled token, where it ranks, has its figure
        assert next(t.logprob for t in item.top_logprobs if t.token == item.token) == item.logprob


def test_a_chat_completion_has_every_tokens_logprob_and_its_top_alternatives(client):
    out = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=30, seed=3, logprobs=True,
                                         top_logprobs=3)
    run = _run(out.id)
    content = out.choices[0].logprobs.content
    assert len(content) == out.usage.completion_tokens == run.completion_tokens > 0
    assert "".join(t.token for t in content) == out.choices[0].message.content == run.assistant_message.content
    for item in content:
        _check_token(item, 3)
    # The fake engine's emitted word is usually, not always, its position's likeliest.
    assert any(t.top_logprobs[0].token == t.token for t in content)
    assert run.sampling["logprobs"] == 3 and len(run.logprobs) == run.completion_tokens


def test_logprobs_without_top_logprobs_has_none_of_the_alternatives(client):
    out = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=10, logprobs=True)
    content = out.choices[0].logprobs.content
    assert len(content) == out.usage.completion_tokens and all(t.top_logprobs == [] for t in content)
    plain = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=10)
    assert plain.choices[0].logprobs is None and "logprobs" not in _run(plain.id).sampling


def test_a_streamed_chunk_carries_the_logprobs_of_its_own_tokens(client):
    chunks = list(client.chat.completions.create(model="flagship", messages=ASK, max_tokens=40, seed=5,
                                                 logprobs=True, top_logprobs=2, stream=True,
                                                 stream_options={"include_usage": True}))
    run = _run(chunks[0].id)
    pieces = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert chunks[0].choices[0].delta.role == "assistant"
    for c in pieces:
        lp = c.choices[0].logprobs.content
        assert "".join(t.token for t in lp) == c.choices[0].delta.content and lp
        for item in lp:
            _check_token(item, 2)
    streamed = [t for c in pieces for t in c.choices[0].logprobs.content]
    assert len(streamed) == chunks[-1].usage.completion_tokens == run.completion_tokens
    assert [[t.token, t.logprob, [[a.token, a.logprob] for a in t.top_logprobs]] for t in streamed] == run.logprobs
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1 and finish[0].choices[0].logprobs is None


def test_the_same_seeded_request_has_the_same_logprobs(client):
    a, b = (client.chat.completions.create(model="flagship", messages=ASK, max_tokens=12, seed=9, logprobs=True,
                                           top_logprobs=4) for _ in range(2))
    assert a.choices[0].logprobs == b.choices[0].logprobs


@pytest.mark.parametrize("fields, param", [
    ({"top_logprobs": 2}, "top_logprobs"), ({"logprobs": False, "top_logprobs": 0}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"), ({"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ({"logprobs": "yes"}, "logprobs"),
])
def test_bad_logprobs_parameters_are_400_by_name(client, fields, param):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="flagship", messages=ASK, max_tokens=5, **fields)
    assert info.value.body["param"] == param and param in info.value.body["message"]
    assert GenerationRun.objects.count() == 0


def test_a_text_completion_has_openais_legacy_logprobs(client):
    out = client.completions.create(model="flagship", prompt=PROMPT, max_tokens=20, logprobs=2, seed=4)
    run = _run(out.id)
    lp = out.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset)
    assert len(lp.tokens) == out.usage.completion_tokens == run.completion_tokens
    assert "".join(lp.tokens) == out.choices[0].text
    assert lp.text_offset == [len("".join(lp.tokens[:i])) for i in range(len(lp.tokens))]
    assert all(f <= 0 for f in lp.token_logprobs) and all(len(top) == 2 for top in lp.top_logprobs)
    assert all(list(top.values()) == sorted(top.values(), reverse=True) for top in lp.top_logprobs)


def test_a_streamed_text_completion_counts_offsets_across_chunks(client):
    chunks = list(client.completions.create(model="flagship", prompt=PROMPT, max_tokens=25, logprobs=1,
                                            stream=True))
    pieces = [c.choices[0] for c in chunks if c.choices[0].text]
    offsets = [o for p in pieces for o in p.logprobs.text_offset]
    tokens = [t for p in pieces for t in p.logprobs.tokens]
    assert "".join(tokens) == "".join(p.text for p in pieces) == _run(chunks[0].id).assistant_message.content
    assert offsets == [len("".join(tokens[:i])) for i in range(len(tokens))]


def test_text_logprobs_zero_has_the_tokens_and_no_alternatives(client):
    out = client.completions.create(model="flagship", prompt=PROMPT, max_tokens=8, logprobs=0)
    lp = out.choices[0].logprobs
    assert len(lp.tokens) == out.usage.completion_tokens and lp.top_logprobs == [{}] * len(lp.tokens)


def test_logprobs_are_read_back_from_postgres_after_the_stream_expired(client, live_url, api_key):
    headers = {"Idempotency-Key": "lp-1"}
    first = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=20, logprobs=True,
                                           top_logprobs=2, extra_headers=headers)
    run = _run(first.id)
    get_redis().delete(redis_keys.run_stream(run.pk))  # as the stream TTL does
    again = client.chat.completions.create(model="flagship", messages=ASK, max_tokens=20, logprobs=True,
                                           top_logprobs=2, extra_headers=headers)
    assert again.id == first.id and again.choices[0].logprobs == first.choices[0].logprobs
    assert again.choices[0].logprobs.content  # not empty
    # A streamed replay after the stream expired: the saved reply in one chunk, with all its tokens' logprobs.
    def streamed():
        chunks = list(client.chat.completions.create(model="flagship", messages=ASK, max_tokens=20, logprobs=True,
                                                     top_logprobs=2, stream=True,
                                                     extra_headers={"Idempotency-Key": "lp-s"}))
        return [c for c in chunks if c.choices and c.choices[0].logprobs]
    live = streamed()
    get_redis().delete(redis_keys.run_stream(_run(live[0].id).pk))
    saved = streamed()
    assert len(saved) == 1 < len(live)
    assert saved[0].choices[0].logprobs.content == [t for c in live for t in c.choices[0].logprobs.content]
    text = httpx.post(f"{live_url}/v1/completions", headers={"Authorization": f"Bearer {api_key}",
                                                             "Idempotency-Key": "lp-2"},
                      json={"model": "flagship", "prompt": PROMPT, "max_tokens": 9, "logprobs": 1}, timeout=60).json()
    get_redis().delete(redis_keys.run_stream(int(text["id"].split("-")[1])))
    replay = httpx.post(f"{live_url}/v1/completions", headers={"Authorization": f"Bearer {api_key}",
                                                               "Idempotency-Key": "lp-2"},
                        json={"model": "flagship", "prompt": PROMPT, "max_tokens": 9, "logprobs": 1}, timeout=60)
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.json()["choices"][0]["logprobs"] == text["choices"][0]["logprobs"] and text["choices"][0]["logprobs"]
