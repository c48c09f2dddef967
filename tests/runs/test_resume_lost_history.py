"""Resuming from a Last-Event-ID the run's stream no longer holds: its entries were lost
(a Redis restart without persistence) and the run wrote its reply again from token 0,
under new ids. The client's text is replaced, never added to. The streams here are
written by hand, as the two lives of one run's stream would be; tests/faults restarts a
real Redis under a real run."""
import pytest

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs.admission import run_submit
from chatsite.runs.stream import codec
from tests.factories import ChatFactory, queueing_pool
from tests.runs.helpers import xadd_tokens
from tests.sse import read_events, text_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(tenant, user):
    idle_pool = queueing_pool("no-worker-pool")  # no worker consumes it: we write the stream by hand
    return run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=idle_pool), content="hi")


def _lose_and_restart(run_id: int, parts: list[str]) -> list[str]:
    """The stream's entries lost, and the run's next attempt writing from token 0 again."""
    get_redis().delete(redis_keys.run_stream(run_id))
    return xadd_tokens(run_id, parts, attempt=2)


def test_a_resume_from_a_lost_history_replaces_the_text_then_follows_on(live_url, auth, run):
    url = f"{live_url}/api/runs/{run.pk}/events"
    xadd_tokens(run.pk, ["Hel", "lo", " th"])
    before = read_events(url, headers=auth, max_events=2)  # "Hello", then the connection drops
    # Sampled again, the new attempt need not say what the lost one said.
    _lose_and_restart(run.pk, ["Hey", " you"])
    replaced = read_events(url, headers=auth, last_event_id=before[-1].id, max_events=1)
    assert [(e.event, e.data) for e in replaced] == [("snapshot", {"text": "Hey you", "n": 2})]
    xadd_tokens(run.pk, [" there", "!"], start=2, attempt=2)
    get_redis().xadd(redis_keys.run_stream(run.pk), codec.done_fields(finish_reason="stop", prompt_tokens=1,
                                                                      completion_tokens=4))
    rest = read_events(url, headers=auth, last_event_id=replaced[-1].id)  # goes on after the snapshot
    assert [(e.event, e.data.get("seq")) for e in rest] == [("token", 2), ("token", 3), ("done", None)]
    assert text_of(before + replaced + rest) == "Hey you there!" == text_of(read_events(url, headers=auth))


def test_a_resume_from_a_lost_history_before_the_new_first_token_empties_the_text(live_url, auth, run):
    url = f"{live_url}/api/runs/{run.pk}/events"
    xadd_tokens(run.pk, ["Hel", "lo"])
    before = read_events(url, headers=auth, max_events=2)
    get_redis().delete(redis_keys.run_stream(run.pk))  # lost; the next attempt has not written yet
    replaced = read_events(url, headers=auth, last_event_id=before[-1].id, max_events=1)
    assert [(e.id, e.event, e.data) for e in replaced] == [(None, "snapshot", {"text": "", "n": 0})]
    _lose_and_restart(run.pk, ["Hel", "lo"])
    get_redis().xadd(redis_keys.run_stream(run.pk), codec.done_fields(finish_reason="stop", prompt_tokens=1,
                                                                      completion_tokens=2))
    # The snapshot had no id: the client still holds its old one, and is told the same again, whole.
    again = read_events(url, headers=auth, last_event_id=before[-1].id)
    assert [e.event for e in again] == ["snapshot", "done"] and again[0].data == {"text": "Hello", "n": 2}
    assert text_of(before + replaced + again) == "Hello"


def test_a_resume_from_a_lost_history_of_an_ended_run_gets_the_new_text_and_the_end(live_url, auth, run):
    url = f"{live_url}/api/runs/{run.pk}/events"
    xadd_tokens(run.pk, ["Hel", "lo", " th"])
    before = read_events(url, headers=auth, max_events=3)
    ids = _lose_and_restart(run.pk, ["Hel", "lo", " there"])
    get_redis().xadd(redis_keys.run_stream(run.pk), codec.done_fields(finish_reason="stop", prompt_tokens=1,
                                                                      completion_tokens=3))
    rest = read_events(url, headers=auth, last_event_id=before[-1].id)
    assert [e.event for e in rest] == ["snapshot", "done"] and rest[0].id == ids[-1]
    assert text_of(before + rest) == "Hello there"
