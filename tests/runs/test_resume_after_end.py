"""Resuming a run that ended before the client came back."""
import pytest

from tests.runs.helpers import post_message, wait_terminal
from tests.sse import read_events, text_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_resume_after_the_run_ended_gets_the_rest_and_the_end(live_url, fake_workers, chat, auth):
    run = post_message(live_url, auth, chat.pk, max_tokens=30, temperature=0.5, ignore_eos=True)
    url = live_url + run["events_url"]
    first = read_events(url, headers=auth, max_events=2)  # then the connection drops
    saved = wait_terminal(run["id"])
    rest = read_events(url, headers=auth, last_event_id=first[-1].id, timeout=20)
    assert rest[-1].event == "done" and all(e.event == "token" for e in rest[:-1])
    assert text_of(first) + text_of(rest) == saved.assistant_message.content


def test_resume_from_the_terminal_event_gets_it_again_and_ends(live_url, fake_workers, chat, auth):
    """A client that had the end (or lost its connection as the end arrived) is not
    left on a stream that never ends: it gets the terminal event again, and no text."""
    run = post_message(live_url, auth, chat.pk, max_tokens=10)
    url = live_url + run["events_url"]
    evs = read_events(url, headers=auth)
    assert evs[-1].event == "done"
    again = read_events(url, headers=auth, last_event_id=evs[-1].id, timeout=10)
    assert [(e.id, e.event, e.data) for e in again] == [(evs[-1].id, "done", evs[-1].data)]
    assert read_events(url, headers=auth, last_event_id=evs[-2].id, timeout=10)[-1].id == evs[-1].id
