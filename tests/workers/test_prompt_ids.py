"""A run's prompt starts from the token ids its claim read (chatsite.runs.store.claim): the
claim reads, in its own statement, the ids kept with the replies a prompt may start with."""
from types import SimpleNamespace

import pytest

from chatsite.chats.models import Message
from chatsite.runs.admission import run_continue, run_submit
from chatsite.runs.services.claim import run_claim, run_release
from chatsite.runs.store import finalize
from inference.token_prefix import TokenRecord
from tests.runs.helpers import run_ending
from workers import generation

pytestmark = pytest.mark.django_db  # rolled back: no worker ever sees these runs

# A host whose prompt is the record it was handed to start with.
RT = SimpleNamespace(host=SimpleNamespace(build_prompt=lambda messages, **kwargs: kwargs["known"]))


def _prompt_start(claim):
    return generation._prompt(RT, claim.run, claim.kept, max_prompt_tokens=100, so_far="")


def _ended(claim, ids: list[int], reason: str = "stop", dropped: int = 0) -> None:
    finalize.run_finish(run_id=claim.run.id, ending=run_ending(reason=reason),
                        tokens=TokenRecord(ids, "d" * 32, dropped))
    run_release(run_id=claim.run.id, lease_token=claim.lease_token)


def test_a_first_turn_starts_from_nothing_a_next_turn_and_a_continue_from_the_reply_they_build_on(chat):
    first = run_claim(run_id=run_submit(chat=chat, content="hello", max_tokens=5).pk, worker="w1")
    assert _prompt_start(first) is None
    _ended(first, [5, 6], dropped=3)  # its prompt left out the chat's oldest 3 turns (past the model's room)
    second = run_claim(run_id=run_submit(chat=chat, content="again", max_tokens=5).pk, worker="w1")
    assert _prompt_start(second) == TokenRecord([5, 6], "d" * 32, 3)  # the reply before its question, its drops
    _ended(second, [5, 6, 7, 8], reason="length")
    carried = run_claim(run_id=run_continue(chat=chat, message=Message.objects.get(pk=second.run.assistant_message_id)).pk, worker="w1")
    assert _prompt_start(carried) == TokenRecord([5, 6, 7, 8], "d" * 32)  # the reply it carries on
