"""Two fake-engine workers of one pool: a turn after an earlier reply goes to the worker whose
prefix cache holds that reply's kept ids, whichever worker the chat is pinned to."""
import socket

import pytest

from chatsite.chats.models import MessageTokens
from chatsite.runs.admission import run_regenerate, run_submit
from chatsite.runs.routing import affinity_pin
from chatsite.runs.services.chat_edits import message_select
from inference.fake_details import BLOCK_TOKENS
from tests.runs.helpers import wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def other_worker(start_flagship_worker):
    """A second worker of the flagship pool, with the session's fake-flagship: their full names."""
    start_flagship_worker("fake-flagship-prefix")
    return [f"{name}@{socket.gethostname()}" for name in ("fake-flagship", "fake-flagship-prefix")]


def kept_len(run) -> int:
    return len(MessageTokens.objects.get(message_id=run.assistant_message_id).token_ids) // 4


@pytest.mark.slow
def test_a_turn_after_an_older_reply_goes_to_the_worker_holding_it_not_to_the_chats_pin(other_worker, chat):
    first = wait_terminal(run_submit(chat=chat, content="Explain the loops, with an example or two.",
                                     max_tokens=40).pk)
    holder = first.worker
    assert holder in other_worker and first.status == "completed"
    elsewhere = next(w for w in other_worker if w != holder)
    # The first reply regenerated on the other worker: nothing before its question has kept
    # ids, so the chat's pin decides, and the chat is pinned there after it.
    affinity_pin(chat_id=chat.pk, worker=elsewhere)
    again = wait_terminal(run_regenerate(chat=chat, message=first.assistant_message, max_tokens=40).pk)
    assert again.worker == elsewhere and again.status == "completed"
    # Back to the first version, and a turn after it: its prompt starts with the first
    # reply's kept ids, which only `holder` computed.
    message_select(chat=chat, message=first.assistant_message)
    after = wait_terminal(run_submit(chat=chat, content="And lists?", max_tokens=10).pk)
    assert after.worker == holder, (after.worker, holder)
    assert after.details["cached_tokens"] >= kept_len(first) // BLOCK_TOKENS * BLOCK_TOKENS
