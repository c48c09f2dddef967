"""Run services against real Postgres and Redis, without workers."""
import pytest

from chatsite.chats.models import Chat
from chatsite.errors import Conflict, InvalidInput
from chatsite.runs.models import GenerationRun
from chatsite.runs.admission import run_submit
from chatsite.runs.services import run_cancel, run_claim, run_finalize, run_release
from chatsite.runs.services.chat_edits import chat_delete, message_select
from chatsite.runs.stream import codec, log
from tests.runs.helpers import end_stream, xadd_tokens

pytestmark = pytest.mark.django_db


def test_submit_saves_messages_and_a_queued_run(chat):
    run = run_submit(chat=chat, content="hello there", max_tokens=10, seed=3)
    assert run.status == "queued" and run.max_tokens == 10 and run.seed == 3
    assert run.user_message.content == "hello there" and run.assistant_message.content == ""
    assert run.prompt_snapshot == [{"role": "user", "content": "hello there"}]
    chat.refresh_from_db()
    assert chat.title == "hello there"


@pytest.mark.parametrize("content, title", [
    ("How do I read a large CSV file in Python without loading it all into memory at once?",
     "How do I read a large CSV file in Python without loading it…"),
    ("  short\n\tone  ", "short one"),
    ("x" * 100, "x" * 59 + "…"),
])
def test_a_chat_is_named_after_its_first_message_cut_at_a_word(chat, content, title):
    run_submit(chat=chat, content=content)
    chat.refresh_from_db()
    assert chat.title == title and len(chat.title) <= 60


def test_second_message_while_a_reply_is_generated_is_refused(chat):
    run_submit(chat=chat, content="one")
    with pytest.raises(Conflict):
        run_submit(chat=chat, content="two")
    assert GenerationRun.objects.count() == 1 and chat.messages.count() == 2


def test_next_message_right_after_the_stream_ended_is_admitted_with_the_reply_in_its_prompt(chat):
    """The terminal entry is written before the worker saves the run: a client that
    posts as soon as it reads `done` is not told a reply is still being generated."""
    first = run_submit(chat=chat, content="one")
    xadd_tokens(first.pk, ["Un", "o"])
    end_stream(first.pk, codec.done_fields(finish_reason="stop", prompt_tokens=5, completion_tokens=2))
    second = run_submit(chat=chat, content="two")  # the worker has not finalized `first` yet
    first.refresh_from_db()
    assert first.status == "completed" and first.assistant_message.content == "Uno"
    assert second.status == "queued"
    assert second.prompt_snapshot == [{"role": "user", "content": "one"}, {"role": "assistant", "content": "Uno"},
                                      {"role": "user", "content": "two"}]


def test_a_chat_whose_reply_stream_ended_before_its_worker_saved_it_can_be_changed_at_once(chat):
    """Choosing a version and deleting the chat, as a client does when it reads `done`:
    the reply is saved first, as the door saves it, not refused as still being generated."""
    first = run_submit(chat=chat, content="one")
    with pytest.raises(Conflict):  # still streaming
        message_select(chat=chat, message=first.assistant_message)
    xadd_tokens(first.pk, ["Un", "o"])
    end_stream(first.pk, codec.done_fields(finish_reason="stop", prompt_tokens=5, completion_tokens=2))
    assert message_select(chat=chat, message=first.assistant_message) == first.assistant_message_id
    first.refresh_from_db()
    assert first.status == "completed" and first.assistant_message.content == "Uno"
    second = run_submit(chat=chat, content="two")
    xadd_tokens(second.pk, ["Dos"])
    end_stream(second.pk, codec.done_fields(finish_reason="stop", prompt_tokens=5, completion_tokens=1))
    chat_delete(chat=chat)
    assert not Chat.objects.filter(pk=chat.pk).exists()


@pytest.mark.parametrize("kwargs, field", [
    ({"content": ""}, "content"), ({"content": "   "}, "content"), ({"content": "a\x00b"}, "content"),
    ({"content": "x" * 40000}, "content"), ({"content": "hi", "max_tokens": 0}, "max_tokens"),
    ({"content": "hi", "max_tokens": 100000}, "max_tokens"), ({"content": "hi", "temperature": float("nan")}, "temperature"),
    ({"content": "hi", "temperature": -1}, "temperature"), ({"content": "hi", "top_p": 0}, "top_p"),
    ({"content": "hi", "stop": ["a"] * 9}, "stop"), ({"content": "hi", "seed": -2**63 - 1}, "seed"),
    ({"content": "hi", "tier": "urgent"}, "tier"),
])
def test_bad_input_is_refused_with_the_field_and_nothing_written(chat, kwargs, field):
    with pytest.raises(InvalidInput) as info:
        run_submit(chat=chat, **kwargs)
    assert info.value.field == field
    assert GenerationRun.objects.count() == 0 and chat.messages.count() == 0


def test_idempotency_key_returns_the_first_run(chat):
    a = run_submit(chat=chat, content="hello", idempotency_key="k1")
    b = run_submit(chat=chat, content="hello", idempotency_key="k1")
    assert a.pk == b.pk and GenerationRun.objects.count() == 1


def test_claim_is_exclusive_and_counts_attempts(chat):
    run = run_submit(chat=chat, content="hello")
    first = run_claim(run_id=run.pk, worker="w1")
    assert first is not None and first.run.attempt == 1 and GenerationRun.objects.get(pk=run.pk).status == "running"
    assert run_claim(run_id=run.pk, worker="w2") is None  # a live attempt holds it
    run_release(run_id=run.pk, lease_token=first.lease_token)
    second = run_claim(run_id=run.pk, worker="w2")  # the first attempt died: a new one may take it
    assert second is not None and second.run.attempt == 2
    run_release(run_id=run.pk, lease_token=second.lease_token)


def test_finalize_rebuilds_from_the_stream_and_is_idempotent(chat):
    run = run_submit(chat=chat, content="hello")
    xadd_tokens(run.pk, ["Hel", "lo", " wor"])
    xadd_tokens(run.pk, ["lo", " wor", "ld"], start=1, attempt=2)  # a second attempt repeating two entries
    assert run_finalize(run_id=run.pk) is None  # no terminal entry yet: nothing saved
    end_stream(run.pk, codec.done_fields(finish_reason="stop", prompt_tokens=7, completion_tokens=4))
    assert run_finalize(run_id=run.pk) == "completed"
    done = GenerationRun.objects.get(pk=run.pk)
    assert done.status == "completed" and done.assistant_message.content == "Hello world"
    assert done.completion_tokens == 4 and done.prompt_tokens == 7 and done.ttft_ms is not None
    assert run_finalize(run_id=run.pk) == "completed"
    assert GenerationRun.objects.get(pk=run.pk).finished_at == done.finished_at


def test_rebuild_ends_the_reply_at_a_gap():
    entries = [codec.decode("1-0", codec.token_fields(seq=0, n=2, text="ab", attempt=1)),
               codec.decode("2-0", codec.token_fields(seq=3, n=1, text="d", attempt=1)),
               codec.decode("3-0", codec.done_fields(finish_reason="stop", prompt_tokens=1, completion_tokens=4))]
    reply = log.rebuild(entries)
    assert reply.text == "ab" and reply.completion_tokens == 2
    assert reply.gap.code == "stream_gap" and "skips from token 2 to 3" in reply.gap.message
    assert reply.end is reply.gap and reply.terminal.type == "done"


def test_cancel_of_a_queued_run_ends_it_at_once(chat):
    run = run_submit(chat=chat, content="hello")
    cancelled = run_cancel(run=run)
    assert cancelled.status == "cancelled" and cancelled.finish_reason == "cancelled"
    reply = log.read(run.pk)
    assert reply.terminal.finish_reason == "cancelled"
    assert run_claim(run_id=run.pk, worker="late-worker") is None  # a late task does nothing
    assert run_cancel(run=cancelled).status == "cancelled"  # idempotent


def test_cancel_of_a_run_whose_stream_has_a_gap_fails_it_cleanly(chat):
    run = run_submit(chat=chat, content="hello")
    xadd_tokens(run.pk, ["a"])
    xadd_tokens(run.pk, ["z"], start=3)
    ended = run_cancel(run=run)
    assert ended.status == "failed" and ended.error.startswith("stream_gap: ")
    assert ended.assistant_message.content == "a"
    assert run_submit(chat=chat, content="again").status == "queued"
