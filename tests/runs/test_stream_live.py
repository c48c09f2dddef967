"""The whole path with real processes: API -> Celery -> worker -> Redis Stream -> SSE.

Uses the deterministic fake engine in a real Celery worker; tests/e2e runs the
same path on the real vLLM engine."""
import pytest
from celery import current_app

from chatsite.redis_client import get_redis
from chatsite import redis_keys
from chatsite.runs import queues
from chatsite.runs.stream import codec, log
from tests.runs.helpers import post_message, wait_terminal
from tests.sse import read_events, text_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_streamed_text_equals_saved_message(live_url, fake_workers, chat, auth):
    run = post_message(live_url, auth, chat.pk)
    evs = read_events(live_url + run["events_url"], headers=auth)
    assert evs[-1].event == "done" and evs[-1].data["finish_reason"] in ("stop", "length")
    tokens = [e for e in evs if e.event == "token"]
    starts = [0]
    for e in tokens[:-1]:
        starts.append(starts[-1] + e.data["n"])
    assert [e.data["seq"] for e in tokens] == starts  # contiguous: each entry starts where the last ended
    saved = wait_terminal(run["id"])
    assert saved.status == "completed"
    assert saved.assistant_message.content == text_of(evs) != ""
    assert saved.completion_tokens == sum(e.data["n"] for e in tokens) == evs[-1].data["usage"]["completion_tokens"]
    assert saved.ttft_ms is not None and saved.attempt == 1


@pytest.mark.parametrize("k", [1, 5, 17])
def test_resume_from_last_event_id_loses_and_repeats_nothing(live_url, fake_workers, chat, auth, k):
    # Enough tokens for more than k entries even when a loaded writer merges many into one.
    run = post_message(live_url, auth, chat.pk, max_tokens=160, temperature=0.5, ignore_eos=True)
    url = live_url + run["events_url"]
    first = read_events(url, headers=auth, max_events=k)  # then the connection drops
    assert len(first) == k
    rest = read_events(url, headers=auth, last_event_id=first[-1].id)
    whole = read_events(url, headers=auth)
    if first[-1].event == "done":  # the run ended within k entries: a client that had the end gets it again
        assert [(e.id, e.event) for e in rest] == [(first[-1].id, "done")]
        rest = []
    ids = [e.id for e in first + rest]
    assert len(ids) == len(set(ids))
    assert text_of(first) + text_of(rest) == text_of(whole) == wait_terminal(run["id"]).assistant_message.content


def test_second_reader_attaches_mid_run_and_sees_the_same_text(live_url, fake_workers, chat, auth):
    run = post_message(live_url, auth, chat.pk, max_tokens=60, ignore_eos=True)
    url = live_url + run["events_url"]
    early = read_events(url, headers=auth, max_events=3)
    late = read_events(url, headers=auth)  # attaches while the run is going: replays, then live
    assert early[-1].event == "token"
    assert text_of(late) == wait_terminal(run["id"]).assistant_message.content
    assert text_of(late).startswith(text_of(early))


def test_task_delivered_twice_generates_once(live_url, fake_workers, chat, auth):
    run = post_message(live_url, auth, chat.pk, max_tokens=30)
    # a duplicate delivery of the same task, as a redelivery would make
    current_app.send_task(queues.GENERATE_TASK, args=[run["id"]], queue=queues.pool_queue("flagship", "interactive"))
    saved = wait_terminal(run["id"])
    # the duplicate arrives while or after the first runs; give it time to act, then check it did nothing
    current_app.send_task(queues.GENERATE_TASK, args=[run["id"]], queue=queues.pool_queue("flagship", "interactive"))
    import time
    time.sleep(1.0)
    entries = log.entries(run["id"])
    tokens = [e for e in entries if e.type == codec.TOKEN]
    assert {e.attempt for e in tokens} == {1}
    assert [e.seq for e in tokens] == [sum(t.n for t in tokens[:i]) for i in range(len(tokens))]
    assert sum(e.is_terminal for e in entries) == 1
    saved.refresh_from_db()
    assert saved.attempt == 1 and saved.status == "completed"


def test_finished_run_with_expired_stream_is_served_from_postgres(live_url, fake_workers, chat, auth):
    run = post_message(live_url, auth, chat.pk, max_tokens=20)
    saved = wait_terminal(run["id"])
    get_redis().delete(redis_keys.run_stream(run["id"]))
    evs = read_events(live_url + run["events_url"], headers=auth)
    assert [e.event for e in evs] == ["snapshot", "done"]
    assert evs[0].data["text"] == saved.assistant_message.content
    saved.refresh_from_db()
    assert saved.attempt == 1  # reading never regenerates
    assert not get_redis().exists(redis_keys.run_stream(run["id"]))


def test_engine_error_ends_the_stream_with_an_error_and_fails_the_run(live_url, fake_workers, chat, auth):
    from inference.fake_backend import FAIL_MARKER

    run = post_message(live_url, auth, chat.pk, content=f"please {FAIL_MARKER}", max_tokens=40)
    evs = read_events(live_url + run["events_url"], headers=auth)
    assert evs[-1].event == "error" and evs[-1].data["code"] == "engine_error"
    saved = wait_terminal(run["id"])
    assert saved.status == "failed" and "injected engine failure" in saved.error
    assert saved.assistant_message.content == text_of(evs)


def test_cancel_stops_the_run_and_keeps_the_partial_reply(live_url, fake_workers, chat, auth):
    import httpx

    run = post_message(live_url, auth, chat.pk, max_tokens=500, ignore_eos=True)  # ~5 s at the fake's pace
    url = live_url + run["events_url"]
    first = read_events(url, headers=auth, max_events=3)
    resp = httpx.post(f"{live_url}/api/runs/{run['id']}/cancel", headers=auth, timeout=10)
    assert resp.status_code == 200
    evs = read_events(url, headers=auth)
    saved = wait_terminal(run["id"])
    assert evs[-1].event == "done" and evs[-1].data["finish_reason"] == "cancelled"
    assert saved.status == "cancelled" and saved.finish_reason == "cancelled"
    assert saved.assistant_message.content == text_of(evs)
    assert text_of(evs).startswith(text_of(first))
    assert 3 <= saved.completion_tokens < 100  # stopped within a few steps of the request, not at 500
    assert httpx.post(f"{live_url}/api/runs/{run['id']}/cancel", headers=auth).json()["status"] == "cancelled"


def test_a_repeated_entry_from_a_retried_write_reaches_no_client_twice(live_url, tenant, user, auth):
    """A pipeline retried after a lost reply may append an entry twice; SSE skips it by seq,
    from the start and on resume."""
    from chatsite.runs.admission import run_submit
    from tests.factories import ChatFactory, queueing_pool

    idle_pool = queueing_pool("no-worker-pool")  # no worker consumes it: we write the stream by hand
    run = run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=idle_pool), content="hi")
    key, r = redis_keys.run_stream(run.pk), get_redis()
    for seq, text in [(0, "Hel"), (1, "lo"), (1, "lo"), (2, " wor"), (2, " wor"), (3, "ld")]:
        r.xadd(key, codec.token_fields(seq=seq, n=1, text=text, attempt=1))
    r.xadd(key, codec.done_fields(finish_reason="stop", prompt_tokens=3, completion_tokens=4))
    url = f"{live_url}/api/runs/{run.pk}/events"
    whole = read_events(url, headers=auth)
    assert text_of(whole) == "Hello world" and [e.data["seq"] for e in whole[:-1]] == [0, 1, 2, 3]
    ids = [eid for eid, _ in r.xrange(key)]
    resumed = read_events(url, headers=auth, last_event_id=ids[1])  # after the first "lo"
    assert text_of(resumed) == " world"


def test_a_worker_taking_a_run_whose_stream_has_a_gap_fails_it_once(live_url, fake_workers, tenant, user, auth):
    """Entries lost (e.g. a Redis restart without persistence) must not poison the system:
    the run fails with a clear error, once, and its readers are told why."""
    from chatsite.runs.admission import run_submit
    from tests.factories import ChatFactory, queueing_pool
    from tests.runs.helpers import xadd_tokens

    idle_pool = queueing_pool("no-worker-pool")  # nobody consumes its queue: we hand the task over by hand
    run = run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=idle_pool), content="hi")
    xadd_tokens(run.pk, ["Hel", "lo"])
    xadd_tokens(run.pk, ["?"], start=7)
    current_app.send_task(queues.GENERATE_TASK, args=[run.pk], queue=queues.pool_queue("flagship", "interactive"))
    saved = wait_terminal(run.pk)
    assert saved.status == "failed" and saved.error.startswith("stream_gap: ") and saved.attempt == 1
    assert saved.assistant_message.content == "Hello"
    evs = read_events(f"{live_url}/api/runs/{run.pk}/events", headers=auth)
    assert text_of(evs) == "Hello" and evs[-1].event == "error" and evs[-1].data["code"] == "stream_gap"
