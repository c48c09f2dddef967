"""A chat's replies keep the token ids their engine held (the fake engine's worker): a
next turn, a regenerate, an edit and a continue start their prompts with them, and the
engine's prefix cache serves that prefix whole (but for its last partial block)."""
import time

import pytest

from chatsite.chats.models import MessageTokens
from chatsite.runs.admission import run_continue, run_regenerate, run_submit
from chatsite.runs.services.cancel import run_cancel
from chatsite.runs.store.tokens import unpack
from chatsite.runs.stream import log as stream_log
from inference.fake_backend import CharTokenizer
from inference.fake_details import BLOCK_TOKENS
from tests.runs.helpers import wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)


def kept(run) -> list[int]:
    return unpack(MessageTokens.objects.get(message_id=run.assistant_message_id).token_ids)


def builds_on(run, ids: list[int]) -> None:
    """The run's engine prompt began with `ids`, and its prefix cache served their full blocks
    (as vLLM's, but the prompt's last token, which the engine always computes: a continue's
    prompt can be `ids` alone)."""
    assert run.status == "completed", run.error
    assert kept(run)[:len(ids)] == ids
    assert run.details["cached_tokens"] >= min(len(ids), run.prompt_tokens - 1) // BLOCK_TOKENS * BLOCK_TOKENS


def test_turns_regenerates_edits_and_continues_start_with_the_kept_ids(fake_workers, chat):
    first = wait_terminal(run_submit(chat=chat, content="Explain the loops.", max_tokens=20).pk)
    ids = kept(first)
    text = CharTokenizer().decode(ids)
    assert text.endswith(first.assistant_message.content)
    assert "Explain the loops." in text and len(ids) > first.prompt_tokens
    # The prompt is not a whole number of the fake tokenizer's three-byte tokens: a fresh
    # rendering of the next turn would split the reply's text otherwise than the engine did.
    assert len(CharTokenizer().decode(ids[:first.prompt_tokens]).encode()) % 3

    second = wait_terminal(run_submit(chat=chat, content="And lists?", max_tokens=20).pk)
    builds_on(second, ids)
    again = wait_terminal(run_regenerate(chat=chat, message=second.assistant_message).pk)
    builds_on(again, ids)
    edited = wait_terminal(run_submit(chat=chat, content="Or sets?", edit_of=second.user_message,
                                      max_tokens=3).pk)
    builds_on(edited, ids)
    assert edited.finish_reason == "length"
    carried_on = wait_terminal(run_continue(chat=chat, message=edited.assistant_message, max_tokens=10).pk)
    builds_on(carried_on, kept(edited))


def test_a_stopped_reply_keeps_the_ids_of_what_it_wrote_and_the_next_turn_builds_on_them(fake_workers, chat):
    run = run_submit(chat=chat, content="Explain the loops.", max_tokens=400, ignore_eos=True)  # ~4 s
    deadline = time.monotonic() + 30
    while not stream_log.entries(run.pk) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # a few tokens in
    run_cancel(run=run)
    stopped = wait_terminal(run.pk)
    assert stopped.status == "cancelled" and 0 < stopped.completion_tokens < 400
    ids = kept(stopped)
    written = stopped.assistant_message.content
    assert written and CharTokenizer().decode(ids).endswith(written)  # the ids spell what was kept, to its stop
    builds_on(wait_terminal(run_submit(chat=chat, content="And lists?", max_tokens=20).pk), ids)


def test_a_reply_with_no_kept_ids_gets_its_prompt_tokenized_whole(fake_workers, chat):
    tokenizer = CharTokenizer()
    first = wait_terminal(run_submit(chat=chat, content="Explain the loops.", max_tokens=20).pk)
    # kept ids would split the next prompt otherwise than a fresh tokenizing: the reply starts off the grid
    assert len(tokenizer.decode(kept(first)[:first.prompt_tokens]).encode()) % 3
    MessageTokens.objects.filter(message_id=first.assistant_message_id).delete()  # as a reply of before
    second = wait_terminal(run_submit(chat=chat, content="And lists?", max_tokens=20).pk)
    assert second.status == "completed"
    prompt_ids = kept(second)[:second.prompt_tokens]
    prompt = tokenizer.decode(prompt_ids)
    assert prompt.count("<|user|>") == 2 and first.assistant_message.content in prompt
    assert prompt_ids == tokenizer.encode(prompt)  # the whole prompt tokenized afresh


def test_a_chat_past_its_room_builds_its_turns_on_the_kept_ids_but_where_it_drops_again(fake_workers, chat):
    """Past the room (admission's: its context set small here), a turn's history starts where
    the turn before's did (chatsite.runs.admission.write.snapshot), so its prompt starts with
    that reply's kept ids, served by the prefix cache; only a turn that drops more starts anew."""
    pool, question = chat.pool, " ".join(["tell me more about loops and lists in Python"] * 3)
    room_before = pool.context_length
    pool.context_length = 700
    pool.save(update_fields=["context_length"])
    try:
        runs = [wait_terminal(run_submit(chat=chat, content=f"{turn}: {question}", max_tokens=20).pk)
                for turn in range(24)]
    finally:
        pool.context_length = room_before
        pool.save(update_fields=["context_length"])
    past = [i for i, run in enumerate(runs) if run.assistant_message.prompt_from_depth is not None]
    assert len(past) >= 10
    moved = [i for i in past[1:] if runs[i].prompt_snapshot[0] != runs[i - 1].prompt_snapshot[0]]
    assert len(moved) <= len(past) // 2
    for i in past[1:]:
        if i not in moved:  # the same start: the reply before's kept ids, cached
            builds_on(runs[i], kept(runs[i - 1]))
