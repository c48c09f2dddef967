"""POST /v1/completions (text completions) with the official `openai` package against
the live stack: the prompt goes to the model as it is, no chat template."""
import openai
import pytest

from chatsite.runs.models import GenerationRun
from inference.fake_backend import CharTokenizer
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "def fibonacci(n):\n    "


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    return v1_client(live_url, api_key)


def _run(completion_id: str) -> GenerationRun:
    assert completion_id.startswith("cmpl-")
    return wait_terminal(int(completion_id.removeprefix("cmpl-")))


def test_a_text_completion_is_the_saved_text_of_a_raw_prompt(client):
    out = client.completions.create(model="flagship", prompt=PROMPT, max_tokens=12, temperature=0.2, seed=4,
                                    stop=["\n\n"], user="someone")
    run = _run(out.id)
    assert out.object == "text_completion" and out.model == "flagship" and len(out.choices) == 1
    assert out.choices[0].text == run.assistant_message.content != "" and out.choices[0].index == 0
    assert out.choices[0].finish_reason in ("stop", "length") and out.choices[0].logprobs is None
    assert run.raw_prompt and run.source == "openai" and run.prompt_snapshot == [{"role": "user", "content": PROMPT}]
    # The engine got the prompt's own tokens: no role markers from a chat template around it.
    assert out.usage.prompt_tokens == run.prompt_tokens == len(CharTokenizer().encode(PROMPT))
    assert out.usage.completion_tokens == run.completion_tokens > 0
    assert (run.seed, run.max_tokens, run.sampling["temperature"], run.sampling["stop"]) == (4, 12, 0.2, ["\n\n"])


def test_the_same_prompt_through_chat_gets_the_template(client):
    text = client.completions.create(model="flagship", prompt=[PROMPT], max_tokens=5)
    chat = client.chat.completions.create(model="flagship", messages=[{"role": "user", "content": PROMPT}],
                                          max_tokens=5)
    assert chat.usage.prompt_tokens > text.usage.prompt_tokens  # the chat template's markers


def test_streaming_in_openais_shape(client):
    chunks = list(client.completions.create(model="flagship", prompt=PROMPT, max_tokens=20, stream=True,
                                            stream_options={"include_usage": True}))
    run = _run(chunks[0].id)
    assert {c.object for c in chunks} == {"text_completion"} and {c.id for c in chunks} == {chunks[0].id}
    assert "".join(c.choices[0].text for c in chunks if c.choices) == run.assistant_message.content != ""
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [run.finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == run.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])


@pytest.mark.parametrize("fields, param", [
    ({"echo": "yes"}, "echo"), ({"suffix": "return x"}, "suffix"), ({"logprobs": 6}, "logprobs"),
    ({"logprobs": -1}, "logprobs"), ({"n": 9}, "n"), ({"n": 0}, "n"), ({"best_of": 3}, "best_of"),
    ({"logit_bias": {"5": -101}}, "logit_bias"), ({"logit_bias": {"five": 1}}, "logit_bias"),
    ({"prompt": []}, "prompt"), ({"prompt": [1, "a"]}, "prompt"), ({"prompt": [[1], []]}, "prompt"),
    ({"prompt": [-1]}, "prompt"), ({"prompt": "  "}, "prompt"),
    ({"temperature": 3}, "temperature"), ({"extra_body": {"top_k": -5}}, "top_k"),
])
def test_refused_by_name(client, fields, param):
    body = {"model": "flagship", "prompt": PROMPT, "max_tokens": 5, **fields}
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(**body)
    assert info.value.body["param"] == param and info.value.body["type"] == "invalid_request_error"
    assert GenerationRun.objects.count() == 0


def test_an_idempotent_retry_gets_the_first_text_completion(client):
    first = client.completions.create(model="flagship", prompt=PROMPT, max_tokens=8,
                                      extra_headers={"Idempotency-Key": "text-1"})
    again = client.completions.create(model="flagship", prompt=PROMPT, max_tokens=8,
                                      extra_headers={"Idempotency-Key": "text-1"})
    assert again.id == first.id and again.choices[0].text == first.choices[0].text
    with pytest.raises(openai.ConflictError):  # the same key for a chat completion is another request
        client.chat.completions.create(model="flagship", messages=[{"role": "user", "content": PROMPT}],
                                       max_tokens=8, extra_headers={"Idempotency-Key": "text-1"})
    assert GenerationRun.objects.count() == 1
