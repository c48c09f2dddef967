"""A chat past its model's room: the prompt snapshot's history starts where the prompt of
the reply it builds on started, while that fits, and drops down to REFILL of the room when
it does not (chatsite.runs.admission.write.snapshot), so that a turn's prompt starts as the
turn before's did (the engine's prefix cache and the reply's kept ids serve it)."""
import pytest

from chatsite.chats.models import Message
from chatsite.pools.tokens import TEMPLATE_TOKENS_PER_MESSAGE, TEMPLATE_TOKENS_PER_PROMPT
from chatsite.runs.admission import run_continue, run_regenerate, run_submit
from chatsite.runs.admission.plan import Plan
from chatsite.runs.admission.write import snapshot
from inference.prompt import REFILL
from tests.runs.helpers import finish_run

pytestmark = pytest.mark.django_db

CONTEXT, MAX_TOKENS = 700, 100
ROOM = CONTEXT - MAX_TOKENS - TEMPLATE_TOKENS_PER_PROMPT


def _question(turn: int) -> str:
    return f"Question {turn}: " + " ".join(["tell me about loops and lists in Python"] * 3)


def _turns(chat, count: int) -> list:
    runs = []
    for turn in range(count):
        run = run_submit(chat=chat, content=_question(turn), max_tokens=MAX_TOKENS)
        runs.append(run)
        finish_run(run, text=f"Answer {turn}. " + "Loops repeat. " * 6, completion_tokens=30)
    return runs


def _estimate(run) -> int:
    """The snapshot's history and question as admission counted them."""
    contents = [m["content"] for m in run.prompt_snapshot]
    rows = Message.objects.filter(chat_id=run.chat_id, content__in=contents).exclude(pk=run.assistant_message_id)
    return TEMPLATE_TOKENS_PER_PROMPT + sum(m.token_count + TEMPLATE_TOKENS_PER_MESSAGE for m in rows)


@pytest.fixture
def small_pool(pool):
    pool.context_length = CONTEXT
    pool.save(update_fields=["context_length"])
    return pool


def test_a_chat_past_its_room_keeps_its_prompts_start_until_the_room_is_full_again(chat, small_pool):
    runs = _turns(chat, 30)
    firsts = [run.prompt_snapshot[0]["content"] for run in runs]
    whole = [i for i, first in enumerate(firsts) if first == _question(0)]
    assert whole == list(range(len(whole))) and 3 <= len(whole) < 20  # whole until it no longer fits
    past = runs[len(whole):]
    assert all(_estimate(run) <= ROOM for run in runs)
    starts = [firsts[len(whole) - 1]] + firsts[len(whole):]
    moves = [i for i in range(1, len(starts)) if starts[i] != starts[i - 1]]
    assert moves and len(moves) <= len(past) // 2  # most turns start as the turn before
    for i in moves:  # a move drops down to REFILL of the room, not just enough
        assert _estimate(past[i - 1]) <= int(ROOM * REFILL)
    for run in runs:  # each reply says where its prompt's history started (nothing: whole)
        reply = Message.objects.get(pk=run.assistant_message_id)
        first = Message.objects.get(chat=chat, content=run.prompt_snapshot[0]["content"])
        assert reply.prompt_from_depth == (None if run in runs[:len(whole)] else first.depth)


def test_a_regenerate_and_a_continue_start_where_the_reply_they_redo_or_carry_on_did(chat, small_pool):
    runs = _turns(chat, 20)
    last = runs[-1]
    assert last.assistant_message.prompt_from_depth is not None  # past the room
    again = run_regenerate(chat=chat, message=last.assistant_message, max_tokens=MAX_TOKENS)
    assert again.prompt_snapshot == last.prompt_snapshot
    finish_run(again, text="Cut", finish_reason="length", completion_tokens=1)
    carried = run_continue(chat=chat, message=Message.objects.get(pk=again.assistant_message_id), max_tokens=MAX_TOKENS)
    assert carried.prompt_snapshot[:-1] == last.prompt_snapshot  # then the reply so far, to carry on
    assert carried.assistant_message.prompt_from_depth == last.assistant_message.prompt_from_depth


def test_an_openai_conversation_is_never_shortened_by_more_than_it_must(chat, small_pool):
    runs = _turns(chat, 20)
    leaf = Message.objects.get(pk=runs[-1].assistant_message_id)
    question = run_submit(chat=chat, content="And sets?", max_tokens=MAX_TOKENS)
    asked = Message.objects.get(pk=question.user_message_id)
    plan = Plan(chat, False, [], small_pool, "", None, asked=asked, room=ROOM)
    stable, tight = snapshot(plan, asked), snapshot(plan, asked, stable=False)
    assert leaf.prompt_from_depth is not None
    assert len(tight.messages) >= len(stable.messages) and tight.tokens <= ROOM
    assert tight.tokens > ROOM - (Message.objects.get(depth=tight.from_depth - 1, chat=chat).token_count
                                  + TEMPLATE_TOKENS_PER_MESSAGE)  # one more message would not fit
