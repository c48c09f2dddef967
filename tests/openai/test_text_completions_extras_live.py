"""/v1/completions beyond one string prompt, through the official `openai` package
against the live stack (fake-engine workers): token-id prompts, several prompts in one
request, `echo`, and `echo` with `logprobs` (the prompt's log probabilities, what
evaluation harnesses score with)."""
import pytest

from chatsite.runs.models import GenerationRun
from tests.factories import PoolFactory
from tests.runs.helpers import wait_terminal
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "def add(a, b):"


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    PoolFactory(name="small")
    return v1_client(live_url, api_key)


def _texts(chunks, size: int) -> list[str]:
    out = [""] * size
    for chunk in chunks:
        for choice in chunk.choices:
            out[choice.index] += choice.text
    return out


def test_a_token_id_prompt_is_the_same_prompt_as_its_text(client):
    said = client.completions.create(model="flagship", prompt=PROMPT, max_tokens=12, seed=5,
                                     extra_body={"return_token_ids": True})
    ids = said.model_dump()["choices"][0]["prompt_token_ids"]
    assert len(ids) == said.usage.prompt_tokens
    again = client.completions.create(model="flagship", prompt=ids, max_tokens=12, seed=5)
    assert again.choices[0].text == said.choices[0].text != ""
    run = wait_terminal(int(again.id.removeprefix("cmpl-")))
    assert run.sampling["prompt_token_ids"] == ids and run.raw_prompt
    streamed = list(client.completions.create(model="flagship", prompt=ids, max_tokens=12, seed=5, stream=True))
    assert "".join(c.choices[0].text for c in streamed if c.choices) == said.choices[0].text


def test_several_prompts_get_a_group_of_n_choices_each(client):
    prompts = ["def add(a, b):", "class Stack:", [1, 2, 3]]
    out = client.completions.create(model="flagship", prompt=prompts, n=2, max_tokens=10, seed=3)
    assert [c.index for c in out.choices] == [0, 1, 2, 3, 4, 5]
    alone = [client.completions.create(model="flagship", prompt=p, n=2, max_tokens=10, seed=3) for p in prompts]
    assert [c.text for c in out.choices] == [c.text for one in alone for c in one.choices]  # prompt by prompt
    assert out.usage.prompt_tokens == sum(one.usage.prompt_tokens for one in alone)  # each prompt counted once
    assert out.usage.completion_tokens == sum(one.usage.completion_tokens for one in alone)
    runs = GenerationRun.objects.filter(chat__runs__isnull=False).distinct()
    assert runs.count() == 12 and len({r.chat_id for r in runs}) == 6  # a chat per prompt
    chunks = list(client.completions.create(model="flagship", prompt=prompts, n=2, max_tokens=10, seed=3,
                                            stream=True, stream_options={"include_usage": True}))
    assert _texts(chunks, 6) == [c.text for c in out.choices]
    assert chunks[-1].usage.prompt_tokens == out.usage.prompt_tokens


def test_a_retry_of_several_prompts_gets_every_prompts_choices_again(client):
    body = dict(model="flagship", prompt=["a", "b"], max_tokens=6, extra_headers={"Idempotency-Key": "two-prompts"})
    first = client.completions.create(**body)
    again = client.completions.with_raw_response.create(**body)
    assert again.headers["idempotent-replayed"] == "true"
    assert [c.text for c in again.parse().choices] == [c.text for c in first.choices] and len(first.choices) == 2
    assert GenerationRun.objects.count() == 2


def test_echo_puts_the_prompt_before_each_choices_text(client):
    out = client.completions.create(model="flagship", prompt=PROMPT, max_tokens=10, seed=2, n=2)
    echoed = client.completions.create(model="flagship", prompt=PROMPT, max_tokens=10, seed=2, n=2, echo=True)
    assert [c.text for c in echoed.choices] == [PROMPT + c.text for c in out.choices]
    chunks = list(client.completions.create(model="flagship", prompt=PROMPT, max_tokens=10, seed=2, n=2, echo=True,
                                            stream=True))
    assert _texts(chunks, 2) == [c.text for c in echoed.choices]
    assert chunks[0].choices[0].text == PROMPT  # the prompt first, in a chunk of its own
    ids = client.completions.create(model="flagship", prompt=PROMPT, max_tokens=1,
                                    extra_body={"return_token_ids": True}).model_dump()["choices"][0]["prompt_token_ids"]
    by_ids = client.completions.create(model="flagship", prompt=ids, max_tokens=10, seed=2, echo=True)
    assert by_ids.choices[0].text == echoed.choices[0].text  # a token-id prompt echoes its decoded text


def test_echo_with_logprobs_scores_the_prompt(client):
    out = client.completions.create(model="flagship", prompt=PROMPT, max_tokens=1, echo=True, logprobs=2,
                                    temperature=0, seed=1)
    lp = out.choices[0].logprobs
    prompt_tokens = out.usage.prompt_tokens
    assert len(lp.tokens) == prompt_tokens + 1 and "".join(lp.tokens) == out.choices[0].text
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None  # the first token has no context
    assert all(x < 0 for x in lp.token_logprobs[1:]) and all(len(t) <= 2 for t in lp.top_logprobs[1:])
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]
    again = client.completions.create(model="flagship", prompt=PROMPT, max_tokens=1, echo=True, logprobs=2,
                                      temperature=0, seed=1)
    assert again.choices[0].logprobs.token_logprobs[:prompt_tokens] == lp.token_logprobs[:prompt_tokens]
    chunks = list(client.completions.create(model="flagship", prompt=PROMPT, max_tokens=1, echo=True, logprobs=2,
                                            temperature=0, seed=1, stream=True))
    streamed = [t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.tokens]
    offsets = [o for c in chunks if c.choices and c.choices[0].logprobs for o in c.choices[0].logprobs.text_offset]
    assert streamed == lp.tokens and offsets == lp.text_offset
