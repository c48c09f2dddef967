"""The Responses API driven by the official `openai` package against the live server
(daphne, Celery workers with the deterministic fake engine, Redis, Postgres)."""
import time

import openai
import pytest

from chatsite import redis_keys
from chatsite.chats.models import Chat
from chatsite.openai_api.models import ResponseRecord
from chatsite.redis_client import get_redis
from chatsite.runs.models import GenerationRun
from chatsite.runs.stream import codec
from tests.factories import PoolFactory, TenantFactory, UserFactory, queueing_pool
from tests.runs.helpers import end_stream, wait_terminal, xadd_tokens
from tests.sdk import v1_client

pytestmark = pytest.mark.django_db(transaction=True)

EVENT_ORDER = ["response.created", "response.in_progress", "response.output_item.added",
               "response.content_part.added"]
CLOSING = ["response.output_text.done", "response.content_part.done", "response.output_item.done"]


@pytest.fixture
def client(live_url, fake_workers, pool, api_key):
    PoolFactory(name="small")
    return v1_client(live_url, api_key)


def _run(response_id: str) -> GenerationRun:
    assert response_id.startswith("resp_")
    return wait_terminal(int(response_id.removeprefix("resp_")))


def test_create_answers_with_the_saved_reply_usage_and_echoes(client):
    out = client.responses.create(model="flagship", input="What does a for loop do?", instructions="Be terse.",
                                  max_output_tokens=200, temperature=0.5, top_p=0.9, metadata={"ticket": "T-1"})
    run = _run(out.id)
    assert out.object == "response" and out.status == "completed" and out.model == "flagship"
    [item] = out.output
    assert item.type == "message" and item.role == "assistant" and item.id == f"msg_{run.pk}"
    assert item.status == "completed" and item.content[0].type == "output_text"
    assert item.content[0].text == run.assistant_message.content != "" and item.content[0].annotations == []
    assert out.output_text == run.assistant_message.content
    assert out.usage.input_tokens == run.prompt_tokens > 0
    assert out.usage.output_tokens == run.completion_tokens > 0
    assert out.usage.total_tokens == run.prompt_tokens + run.completion_tokens
    assert out.instructions == "Be terse." and out.metadata == {"ticket": "T-1"}
    assert (out.temperature, out.top_p, out.max_output_tokens) == (0.5, 0.9, 200) and out.incomplete_details is None
    assert run.source == "openai" and run.max_tokens == 200 and run.sampling["temperature"] == 0.5
    # The instructions are the prompt's system message; the input its user message.
    assert run.prompt_snapshot == [{"role": "system", "content": "Be terse."},
                                   {"role": "user", "content": "What does a for loop do?"}]
    again = client.responses.retrieve(out.id)
    assert again.model_dump() == out.model_dump()


def test_input_items_become_the_conversation(client):
    items = [{"role": "developer", "content": "You are terse."},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi."}]},
             {"role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]},
             {"role": "user", "content": "Tell me more."}]
    out = client.responses.create(model="small", input=items)
    run = _run(out.id)
    assert run.pool.name == "small" and run.chat.listed is False
    assert run.prompt_snapshot == [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi."},
                                   {"role": "assistant", "content": "Hello."},
                                   {"role": "user", "content": "Tell me more."}]


def test_a_reply_cut_at_max_output_tokens_is_incomplete(client):
    out = client.responses.create(model="flagship", input="Explain loops.", max_output_tokens=5)
    run = _run(out.id)
    assert run.finish_reason == "length" and run.completion_tokens == 5
    assert out.status == "incomplete" and out.incomplete_details.reason == "max_output_tokens"
    assert out.output[0].status == "incomplete" and out.output_text == run.assistant_message.content
    # vLLM's extra parameter, as on chat completions: exactly max_output_tokens.
    out = client.responses.create(model="flagship", input="Explain loops.", max_output_tokens=70,
                                  extra_body={"ignore_eos": True})
    assert _run(out.id).completion_tokens == 70 == out.usage.output_tokens and out.status == "incomplete"


def test_stream_sends_openai_events_in_order_spelling_the_saved_text(client):
    events = list(client.responses.create(model="flagship", input="Explain loops.", max_output_tokens=200,
                                          stream=True))
    run = _run(events[0].response.id)
    types = [e.type for e in events]
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert types == EVENT_ORDER + ["response.output_text.delta"] * len(deltas) + CLOSING + ["response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    # One delta per token entry of the run's stream, in its order.
    entries = [codec.decode(i, f) for i, f in get_redis().xrange(redis_keys.run_stream(run.pk))]
    assert [e.delta for e in deltas] == [e.text for e in entries if e.type == codec.TOKEN]
    assert {(e.item_id, e.output_index, e.content_index) for e in deltas} == {(f"msg_{run.pk}", 0, 0)}
    text = "".join(e.delta for e in deltas)
    assert text == run.assistant_message.content != ""
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    done = events[-1].response
    assert done.status == "completed" and done.output_text == text and events[-4].text == text
    assert done.usage.input_tokens == run.prompt_tokens and done.usage.output_tokens == run.completion_tokens
    assert client.responses.retrieve(done.id).model_dump() == done.model_dump()


def test_the_sdk_stream_helper_assembles_the_final_response(client):
    with client.responses.stream(model="flagship", input="Explain loops.", max_output_tokens=200) as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    run = _run(final.id)
    assert final.output_text == text == run.assistant_message.content != ""
    assert final.status == "completed" and final.usage.output_tokens == run.completion_tokens


def test_an_engine_failure_is_response_failed(client):
    from inference.fake_backend import FAIL_MARKER

    events = list(client.responses.create(model="flagship", input=f"please {FAIL_MARKER}", max_output_tokens=40,
                                          stream=True))
    assert events[-1].type == "response.failed" and events[-1].response.status == "failed"
    assert events[-1].response.error.code == "engine_error"
    assert "response.completed" not in [e.type for e in events]
    # Not streamed: the response object, failed, saying why (the model failed, not the request).
    out = client.responses.create(model="flagship", input=f"again {FAIL_MARKER}", max_output_tokens=40)
    assert out.status == "failed" and out.error.code == "engine_error" and out.output == [] and out.usage is None
    run = _run(events[0].response.id)
    assert run.status == "failed"
    assert client.responses.retrieve(events[0].response.id).error.code == "engine_error"


def test_previous_response_id_continues_the_conversation(client):
    first = client.responses.create(model="flagship", input="What is a loop?", instructions="Be terse.")
    second = client.responses.create(model="flagship", input="And a list?", previous_response_id=first.id)
    run1, run2 = _run(first.id), _run(second.id)
    assert second.previous_response_id == first.id and second.instructions is None
    assert run2.chat_id == run1.chat_id
    # The first turn is in the second's prompt; the first's instructions are not carried over (as on OpenAI).
    assert run2.prompt_snapshot == [{"role": "user", "content": "What is a loop?"},
                                    {"role": "assistant", "content": first.output_text},
                                    {"role": "user", "content": "And a list?"}]
    # Continuing the first response again branches from it: the second turn is not in this prompt.
    third = client.responses.create(model="flagship", input="And a dict?", previous_response_id=first.id,
                                    instructions="Answer in one word.")
    run3 = _run(third.id)
    assert run3.prompt_snapshot == [{"role": "system", "content": "Answer in one word."},
                                    {"role": "user", "content": "What is a loop?"},
                                    {"role": "assistant", "content": first.output_text},
                                    {"role": "user", "content": "And a dict?"}]
    assert run3.user_message.parent_id == run1.assistant_message_id == run2.user_message.parent_id
    # Another model may answer the next turn of the same conversation.
    fourth = client.responses.create(model="small", input="Thanks.", previous_response_id=second.id)
    run4 = _run(fourth.id)
    assert fourth.model == "small" == run4.pool.name and run4.chat_id == run1.chat_id
    assert run4.prompt_snapshot[-3:] == [{"role": "user", "content": "And a list?"},
                                         {"role": "assistant", "content": second.output_text},
                                         {"role": "user", "content": "Thanks."}]


def test_cancel_stops_a_queued_response(client):
    queueing_pool("idle")  # no worker serves it: the run waits in its queue
    out = client.responses.create(model="idle", input="Hello?", background=True)
    assert out.status == "queued" and out.background is True and out.output == []
    cancelled = client.responses.cancel(out.id)
    assert cancelled.id == out.id and cancelled.status == "cancelled"
    run = GenerationRun.objects.get(pk=int(out.id.removeprefix("resp_")))
    assert run.status == "cancelled"
    assert client.responses.retrieve(out.id).status == "cancelled"
    assert client.responses.cancel(out.id).status == "cancelled"  # a second cancel changes nothing


def test_retrieving_a_running_response_shows_its_text_so_far(client):
    out = client.responses.create(model="flagship", input="Explain loops.", background=True, max_output_tokens=300,
                                  extra_body={"ignore_eos": True})  # ~3 s at the fake engine's pace
    while (now := client.responses.retrieve(out.id)).status == "queued" or not now.output:
        time.sleep(0.05)
    run = wait_terminal(int(out.id.removeprefix("resp_")))
    assert now.status == "in_progress" and now.output[0].status == "in_progress" and now.usage is None
    assert run.assistant_message.content.startswith(now.output_text) and now.output_text
    assert len(now.output_text) < len(run.assistant_message.content)


def test_cancel_stops_a_running_response_keeping_its_partial_reply(client, live_url, auth):
    out = client.responses.create(model="flagship", input="Explain loops.", background=True, max_output_tokens=500,
                                  extra_body={"ignore_eos": True})  # ~5 s at the fake engine's pace
    run_id = int(out.id.removeprefix("resp_"))
    while get_redis().xlen(redis_keys.run_stream(run_id)) < 5:
        time.sleep(0.01)
    cancelled = client.responses.cancel(out.id)
    run = wait_terminal(run_id)
    assert cancelled.status == "cancelled" == run.status and 0 < run.completion_tokens < 500
    assert cancelled.output_text == run.assistant_message.content and cancelled.output[0].status == "incomplete"
    events = list(client.responses.retrieve(out.id, stream=True))
    assert events[0].response.status == "queued"  # a background response's stream opens with it queued
    assert events[-1].type == "response.incomplete" and events[-1].response.status == "cancelled"
    assert events[-1].response.output_text == run.assistant_message.content


def test_a_conversation_with_a_reply_in_progress_is_409(client):
    queueing_pool("idle")
    out = client.responses.create(model="idle", input="Hello?", background=True)
    with pytest.raises(openai.ConflictError):
        client.responses.create(model="idle", input="And?", previous_response_id=out.id)
    with pytest.raises(openai.ConflictError):
        client.responses.delete(out.id)
    assert GenerationRun.objects.count() == 1 and client.responses.retrieve(out.id).status == "queued"
    client.responses.cancel(out.id)
    client.responses.delete(out.id)  # stopped: now it can go
    assert not GenerationRun.objects.exists()


def _ended_before_its_worker_saved_it(client):
    """A response whose last event ("Hi there") a client has read just before the worker
    saves its run (no worker serves its pool): (the response, its run's id)."""
    queueing_pool("idle")
    out = client.responses.create(model="idle", input="Hello?", background=True)
    run_id = int(out.id.removeprefix("resp_"))
    xadd_tokens(run_id, ["Hi", " there"])
    end_stream(run_id, codec.done_fields(finish_reason="stop", prompt_tokens=5, completion_tokens=2))
    assert GenerationRun.objects.get(pk=run_id).status == "running"
    return out, run_id


def test_continuing_a_reply_whose_stream_ended_before_its_worker_saved_it(client):
    first, run_id = _ended_before_its_worker_saved_it(client)
    second = client.responses.create(model="idle", input="And?", previous_response_id=first.id, background=True)
    assert GenerationRun.objects.get(pk=run_id).status == "completed"
    run2 = GenerationRun.objects.get(pk=int(second.id.removeprefix("resp_")))
    assert run2.prompt_snapshot == [{"role": "user", "content": "Hello?"}, {"role": "assistant", "content": "Hi there"},
                                    {"role": "user", "content": "And?"}]


def test_retrieving_a_response_whose_stream_ended_before_its_worker_saved_it(client):
    out, run_id = _ended_before_its_worker_saved_it(client)  # read response.completed, then retrieves
    got = client.responses.retrieve(out.id)
    assert got.status == "completed" and got.output_text == "Hi there" and got.usage.output_tokens == 2
    assert GenerationRun.objects.get(pk=run_id).status == "completed"


def test_delete_removes_the_conversation(client):
    out = client.responses.create(model="flagship", input="Hello?")
    run = _run(out.id)
    deleted = client.responses.delete(out.id)
    assert deleted is None  # the SDK returns nothing; the body said deleted
    assert not GenerationRun.objects.filter(pk=run.pk).exists() and not Chat.objects.filter(pk=run.chat_id).exists()
    assert not ResponseRecord.objects.exists()
    for call in (lambda: client.responses.retrieve(out.id), lambda: client.responses.delete(out.id)):
        with pytest.raises(openai.NotFoundError):
            call()


def test_another_tenants_response_is_not_found(client, live_url):
    other_tenant = TenantFactory()
    from chatsite.tenancy.services import api_key_create

    _, secret = api_key_create(user=UserFactory(tenant=other_tenant), tenant=other_tenant, name="other")
    other = v1_client(live_url, secret, timeout=30)
    mine = client.responses.create(model="flagship", input="Hello?")
    _run(mine.id)
    for call in (lambda: other.responses.retrieve(mine.id), lambda: other.responses.cancel(mine.id),
                 lambda: other.responses.delete(mine.id),
                 lambda: other.responses.retrieve(mine.id, stream=True, starting_after=2)):
        with pytest.raises(openai.NotFoundError) as info:
            call()
        assert info.value.body["code"] == "response_not_found"
    with pytest.raises(openai.NotFoundError) as info:
        other.responses.create(model="flagship", input="Go on.", previous_response_id=mine.id)
    assert info.value.body["param"] == "previous_response_id"
    assert client.responses.retrieve(mine.id).model_dump() == mine.model_dump()  # untouched
    # A chat completion's run is not a response, even for its owner.
    chat = client.chat.completions.create(model="flagship", messages=[{"role": "user", "content": "Hi"}])
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(chat.id.replace("chatcmpl-", "resp_"))


def test_a_response_keeps_its_replys_token_ids_and_a_chat_completion_does_not(client):
    """A response may be continued (previous_response_id): its reply's ids are kept for that
    turn to start with. A chat completion's chat is the call's own, and the next call sends
    its history again: nothing would read its ids, so none are kept."""
    from chatsite.chats.models import MessageTokens

    first = client.responses.create(model="flagship", input="What does a for loop do?", max_output_tokens=20)
    response_run = _run(first.id)
    assert MessageTokens.objects.filter(message_id=response_run.assistant_message_id).exists()
    then = client.responses.create(model="flagship", input="And a while loop?", previous_response_id=first.id,
                                   max_output_tokens=20)
    continued = _run(then.id)
    assert continued.chat_id == response_run.chat_id and continued.details["cached_tokens"] > 0
    completion = client.chat.completions.create(model="flagship", max_tokens=20, messages=[
        {"role": "user", "content": "What does a for loop do?"}])
    completion_run = wait_terminal(int(completion.id.removeprefix("chatcmpl-")))
    assert completion_run.status == "completed" and not completion_run.keeps_token_ids
    assert not MessageTokens.objects.filter(message_id=completion_run.assistant_message_id).exists()
