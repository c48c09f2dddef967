"""A prompt longer than the model's context is a 400 context_length_exceeded on /v1, in
OpenAI's error shape: never a conversation silently shortened (the web chat trims)."""
import openai
import pytest

from chatsite.runs.models import GenerationRun
from tests.api.helpers import assert_openai_error, key_client, row_counts
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

LONG = "lorem ipsum " * 200  # ~800 estimated tokens: the pool's 1,024 hold one of them with a reply, not two


def _post(api_key, path, body):
    return key_client(api_key).post(path, body, content_type="application/json")


@pytest.mark.django_db
def test_a_last_message_that_cannot_fit(api_key, pool):
    resp = _post(api_key, "/v1/chat/completions", {"model": "flagship", "max_tokens": 100, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": LONG * 2}]})
    err = assert_openai_error(resp, 400, code="context_length_exceeded", param="messages[1].content")
    assert err["type"] == "invalid_request_error" and "shorten it" in err["message"]
    assert row_counts() == (0, 0, 0)


@pytest.mark.django_db
def test_a_conversation_that_cannot_fit_is_refused_not_trimmed(api_key, pool):
    messages = [{"role": "user", "content": LONG}, {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": LONG}]
    resp = _post(api_key, "/v1/chat/completions", {"model": "flagship", "max_tokens": 100, "messages": messages})
    err = assert_openai_error(resp, 400, code="context_length_exceeded", param="messages")
    assert "only the newest 2 of your 3 messages" in err["message"]
    assert row_counts() == (0, 0, 0)
    ok = _post(api_key, "/v1/chat/completions", {"model": "flagship", "max_tokens": 100, "stream": True,
                                                 "messages": messages[-1:]})
    assert ok.status_code == 200  # the newest alone fits


@pytest.mark.django_db
def test_a_text_prompt_that_cannot_fit(api_key, pool):
    resp = _post(api_key, "/v1/completions", {"model": "flagship", "max_tokens": 100, "prompt": LONG * 2})
    assert_openai_error(resp, 400, code="context_length_exceeded", param="prompt")
    assert row_counts() == (0, 0, 0)


@pytest.mark.django_db(transaction=True)
def test_the_worker_refuses_what_admission_underestimated(live_url, fake_workers, pool, api_key):
    """80 short messages: admission's estimate (4 template tokens a message) fits them in
    the room left by max_tokens 320; the real template takes more, and the worker ends
    the run with context_length_exceeded instead of dropping the oldest."""
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": "hello world!"} for i in range(81)]
    client = v1_client(live_url, api_key)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="flagship", messages=messages, max_tokens=320)
    assert info.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.APIError) as info:
        list(client.chat.completions.create(model="flagship", messages=messages, max_tokens=320, stream=True))
    assert info.value.body["code"] == "context_length_exceeded"
    runs = [wait_terminal(pk) for pk in GenerationRun.objects.values_list("pk", flat=True)]
    assert [(r.status, r.completion_tokens) for r in runs] == [("failed", 0)] * 2
    assert all(len(r.prompt_snapshot) == 81 for r in runs)  # admission kept them all: the worker refused
