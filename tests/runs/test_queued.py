"""Queued messages (chatsite.runs.services.queued) against real Postgres and Redis, without
workers: a run ends here the way its worker, a stop or the sweep ends it (its terminal
entry, then run_finalize), and the chat's queue advances from that ending."""
import threading
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import connection

from chatsite.chats.models import QueuedMessage
from chatsite.chats.selectors import queue_of, queued_places
from chatsite.errors import Conflict, InvalidInput, NotFound
from chatsite.runs.admission import Admitted, Ask, Caller, InChat, Send, run_submit
from chatsite.runs.admission.ask import PENDING_REPLY
from chatsite.runs.models import GenerationRun
from chatsite.runs.services import run_cancel, run_claim, run_finalize, run_release
from chatsite.runs.services.queued.add import message_send_or_queue, queued_add
from chatsite.runs.services.queued.advance import queue_advance, queues_sweep
from chatsite.runs.services.queued.edit import queued_edit, queued_retry, queued_withdraw
from chatsite.runs.services.queued.rows import MAX_QUEUED_PER_CHAT
from chatsite.runs.services.queued import send_now
from chatsite.runs.services.queued.send_now import queued_send_now
from chatsite.runs.stream import codec, log
from tests.factories import ChatFactory, TenantFactory, UserFactory, queueing_pool
from tests.runs.helpers import end_stream, finish_run, xadd_tokens
from workers import steered
from workers.heartbeat import Heartbeat

pytestmark = pytest.mark.django_db(transaction=True)  # a run's end starts the queue after its commit
Q = QueuedMessage.State


@pytest.fixture
def pool(db):
    """A pool no worker serves, even with the live stack up in this session: these tests
    commit, so their runs are dispatched, and they end the runs themselves."""
    return queueing_pool("unserved")


def _ask(chat, content, key="", **sampling):
    return Ask(caller=Caller(chat.tenant, chat.owner), where=InChat(chat.pk), turn=Send(content), sampling=sampling,
               idempotency_key=key)


def _queue(chat, content, **kw) -> QueuedMessage:
    sent = message_send_or_queue(ask=_ask(chat, content, **kw))
    assert isinstance(sent, QueuedMessage), sent
    return sent


def _started(item) -> GenerationRun:
    item.refresh_from_db()
    assert item.state == Q.STARTED, (item.state, item.error)
    return GenerationRun.objects.select_related("user_message", "assistant_message").get(pk=item.run_id)


def test_messages_sent_during_a_reply_wait_and_start_in_order_one_at_a_time(chat):
    first = run_submit(chat=chat, content="one")
    a, b = _queue(chat, "two", max_tokens=7), _queue(chat, "three")
    assert [m.pk for m in queue_of(chat=chat)] == [a.pk, b.pk]
    assert queued_places(chat=chat) == {a.pk: 1, b.pk: 2}
    assert GenerationRun.objects.count() == 1 and chat.messages.count() == 2  # nothing written in the tree yet

    finish_run(first, "Uno")
    second = _started(a)
    assert second.user_message.content == "two" and second.max_tokens == 7  # its own settings kept
    assert second.user_message.parent_id == first.assistant_message_id  # after the reply it waited for
    assert second.prompt_snapshot[-2:] == [{"role": "assistant", "content": "Uno"}, {"role": "user", "content": "two"}]
    b.refresh_from_db()
    assert b.state == Q.QUEUED and queued_places(chat=chat) == {b.pk: 1}
    for _ in range(2):  # a second advance (or a repeated ending) starts nothing more while `second` runs
        assert queue_advance(chat_id=chat.pk) is None
        assert run_finalize(run_id=first.pk) == "completed"
    assert GenerationRun.objects.count() == 2

    finish_run(second)
    third = _started(b)
    assert third.user_message.parent_id == second.assistant_message_id and queue_of(chat=chat) == []
    assert GenerationRun.objects.count() == 3


def test_a_message_to_an_idle_chat_is_sent_at_once(chat):
    sent = message_send_or_queue(ask=_ask(chat, "hello"))
    assert isinstance(sent, Admitted) and sent.run.user_message.content == "hello"
    assert not QueuedMessage.objects.exists()


@pytest.mark.parametrize("ending", ["stopped", "failed"])
def test_a_stopped_or_failed_reply_starts_the_queue_too(chat, ending):
    first = run_submit(chat=chat, content="one")
    item = _queue(chat, "two")
    if ending == "stopped":
        run_cancel(run=first)  # no attempt holds it: ended here, as cancelled
    else:
        end_stream(first.pk, codec.error_fields(code="engine_error", message="boom"))
        run_finalize(run_id=first.pk)
    first.refresh_from_db()
    assert first.status == ("cancelled" if ending == "stopped" else "failed")
    assert first.finish_reason != "interrupted"  # a plain stop is not a steer
    assert _started(item).user_message.content == "two"


def test_a_queued_message_can_be_edited_or_withdrawn_until_it_starts(chat):
    first = run_submit(chat=chat, content="one")
    a, b = _queue(chat, "two"), _queue(chat, "three")
    owner = dict(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk)
    assert queued_edit(**owner, queued_id=a.pk, content="two, edited").content == "two, edited"
    with pytest.raises(InvalidInput):
        queued_edit(**owner, queued_id=a.pk, content="   ")
    assert queued_withdraw(**owner, queued_id=b.pk).state == Q.WITHDRAWN
    with pytest.raises(Conflict):
        queued_edit(**owner, queued_id=b.pk, content="back")
    finish_run(first)
    assert _started(a).user_message.content == "two, edited"
    with pytest.raises(Conflict):
        queued_withdraw(**owner, queued_id=a.pk)
    b.refresh_from_db()
    assert b.state == Q.WITHDRAWN and b.run_id is None and GenerationRun.objects.count() == 2


def test_another_users_queue_is_not_found(chat):
    run_submit(chat=chat, content="one")
    item = _queue(chat, "two")
    other_tenant = TenantFactory()
    for tenant, user in ((chat.tenant, UserFactory(tenant=chat.tenant)), (other_tenant, UserFactory(tenant=other_tenant))):
        for act in (lambda: queued_withdraw(tenant=tenant, user=user, chat_id=chat.pk, queued_id=item.pk),
                    lambda: queued_edit(tenant=tenant, user=user, chat_id=chat.pk, queued_id=item.pk, content="x"),
                    lambda: queued_send_now(tenant=tenant, user=user, chat_id=chat.pk, queued_id=item.pk),
                    lambda: queued_add(ask=Ask(caller=Caller(tenant, user), where=InChat(chat.pk), turn=Send("x")))):
            with pytest.raises(NotFound):
                act()
    other_chat = ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=chat.pool)
    with pytest.raises(NotFound):  # the right owner, the wrong chat
        queued_withdraw(tenant=chat.tenant, user=chat.owner, chat_id=other_chat.pk, queued_id=item.pk)
    item.refresh_from_db()
    assert item.state == Q.QUEUED and item.content == "two"


def _settled(steered_run: GenerationRun, stopped: GenerationRun, rt=None):
    """The steered run as its worker claims it, its snapshot filled in (workers.steered)."""
    claim = run_claim(run_id=steered_run.pk, worker="steered-worker")
    assert claim is not None and steered.pending_run(claim) == stopped.pk
    try:
        return steered.settle(rt or SimpleNamespace(heartbeat=Heartbeat(None)), claim, stopped.pk)
    finally:
        run_release(run_id=steered_run.pk, lease_token=claim.lease_token)


def test_send_now_stops_the_reply_keeps_it_as_interrupted_and_runs_next_with_it(chat):
    first = run_submit(chat=chat, content="one")
    xadd_tokens(first.pk, ["Half", " a"])  # the reply so far
    a, b = _queue(chat, "two"), _queue(chat, "three")
    sent = queued_send_now(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk, queued_id=b.pk)
    assert sent.state == Q.STARTED and sent.interrupted_run_id == first.pk
    first.refresh_from_db()
    assert first.status == "cancelled" and first.finish_reason == "interrupted"
    assert first.assistant_message.content == "Half a"  # the partial reply is kept, as the reply
    steered_run = _started(b)
    assert steered_run.user_message.parent_id == first.assistant_message_id
    # Admitted before the stop was asked: the reply stands in its snapshot by its run, until its worker
    # puts the saved text there.
    assert steered_run.prompt_snapshot[-2:] == [{"role": "assistant", "content": "", PENDING_REPLY: first.pk},
                                                {"role": "user", "content": "three"}]
    assert _settled(steered_run, first).run.prompt_snapshot[-2:] == [
        {"role": "assistant", "content": "Half a"}, {"role": "user", "content": "three"}]
    a.refresh_from_db()
    assert a.state == Q.QUEUED  # still waiting, now behind the reply to "three"
    with pytest.raises(Conflict):
        queued_send_now(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk, queued_id=b.pk)
    finish_run(steered_run)
    assert _started(a).user_message.parent_id == steered_run.assistant_message_id


def _worker_stops_when_asked(run, *, delay=0.0):
    """A worker holding `run`: once the stop is asked (and `delay` later), it writes the
    reply's end as its lease holder, and does not save it (its process is busy). The thread."""
    claim = run_claim(run_id=run.pk, worker="busy-worker")
    assert claim is not None

    def stop():
        end = time.monotonic() + 10
        while not log.cancel_asked(run.pk):
            assert time.monotonic() < end
            time.sleep(0.005)
        time.sleep(delay)
        assert log.end(run_id=run.pk, lease_token=claim.lease_token, fields=codec.done_fields(
            finish_reason="cancelled", prompt_tokens=3, completion_tokens=2))

    thread = threading.Thread(target=stop)
    thread.start()
    return thread


def test_send_now_starts_its_message_before_the_stop_and_its_worker_waits_for_the_reply_saved(chat):
    first = run_submit(chat=chat, content="one")
    xadd_tokens(first.pk, ["Half", " a"])
    b = _queue(chat, "three")
    worker = _worker_stops_when_asked(first, delay=0.2)
    sent = queued_send_now(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk, queued_id=b.pk)
    assert sent.state == Q.STARTED and not log.has_ended(first.pk)  # started at once, the stop still to come
    steered_run = _started(b)
    # Its worker: the reply's stop is written, its own worker (busy) has not saved it, the steered one does.
    settled = _settled(steered_run, first)
    worker.join()
    first.refresh_from_db()
    assert first.status == "cancelled" and first.finish_reason == "interrupted"
    assert first.assistant_message.content == "Half a"
    assert settled.run.prompt_snapshot[-2:] == [{"role": "assistant", "content": "Half a"},
                                                {"role": "user", "content": "three"}]
    assert GenerationRun.objects.filter(chat=chat).count() == 2  # once: the reply's save starts nothing more
    assert run_finalize(run_id=first.pk) == "cancelled" and GenerationRun.objects.filter(chat=chat).count() == 2


def test_a_reply_saved_before_send_now_admits_its_message_ends_interrupted_and_is_in_its_prompt(chat, monkeypatch):
    first = run_submit(chat=chat, content="one")
    xadd_tokens(first.pk, ["Half", " a"])
    b = _queue(chat, "three")
    worker = _worker_stops_when_asked(first)
    admit = send_now.queue_start_steering

    def admit_once_the_reply_is_saved(item, stops, **kwargs):
        worker.join()  # the stop written as soon as it was asked, and saved by its worker, before the admission
        saved = []
        saving = threading.Thread(target=lambda: (saved.append(run_finalize(run_id=first.pk)), connection.close()))
        saving.start()
        saving.join()
        assert saved == ["cancelled"]
        return admit(item, stops, **kwargs)

    monkeypatch.setattr(send_now, "queue_start_steering", admit_once_the_reply_is_saved)
    sent = queued_send_now(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk, queued_id=b.pk)
    first.refresh_from_db()
    assert first.status == "cancelled" and first.finish_reason == "interrupted"
    steered_run = _started(b)
    assert sent.state == Q.STARTED and GenerationRun.objects.filter(chat=chat).count() == 2
    # Saved before the door read it: no stand-in, its text as saved.
    assert steered_run.prompt_snapshot[-2:] == [{"role": "assistant", "content": "Half a"},
                                                {"role": "user", "content": "three"}]


def test_a_steered_prompt_waits_for_the_save_of_a_reply_its_own_worker_holds(chat):
    first = run_submit(chat=chat, content="one")
    xadd_tokens(first.pk, ["Half", " a"])
    b = _queue(chat, "three")
    queued_send_now(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk, queued_id=b.pk)
    steered_run = _started(b)
    # The stopped reply is held by the steered run's own worker: its save is waited for, not raced.
    heartbeat = Heartbeat(None)
    heartbeat.hold(first.pk, "token", since=time.monotonic())
    dropped_at = []

    def saved_then_dropped():
        time.sleep(0.2)
        dropped_at.append(time.monotonic())
        heartbeat.drop(first.pk)

    threading.Thread(target=saved_then_dropped).start()
    settled = _settled(steered_run, first, rt=SimpleNamespace(heartbeat=heartbeat))
    assert dropped_at  # it returned only once the holder had dropped the reply's lease
    assert settled.run.prompt_snapshot[-2] == {"role": "assistant", "content": "Half a"}


def test_a_steered_prompt_whose_reply_a_live_attempt_never_stops_is_handed_back(chat, settings, monkeypatch):
    first = run_submit(chat=chat, content="one")
    xadd_tokens(first.pk, ["Half"])
    assert run_claim(run_id=first.pk, worker="stuck-worker") is not None  # its lease lives on (6 s)
    b = _queue(chat, "three")
    queued_send_now(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk, queued_id=b.pk)
    monkeypatch.setattr(steered, "MARGIN_SECONDS", 0.0)
    settings.CHATSITE = {**settings.CHATSITE, "RUN_LEASE_SECONDS": 0.3}  # the bound of the wait
    heartbeat = Heartbeat(None)
    heartbeat.hold(first.pk, "token", since=time.monotonic())  # held here, by an attempt that never ends
    assert _settled(_started(b), first, rt=SimpleNamespace(heartbeat=heartbeat)) is None
    first.refresh_from_db()
    assert first.status == "running"  # nothing ended under a live attempt


def test_a_steered_prompt_whose_reply_lost_its_worker_ends_that_reply_once_its_lease_lapses(chat, settings):
    settings.CHATSITE = {**settings.CHATSITE, "RUN_LEASE_SECONDS": 0.3}
    first = run_submit(chat=chat, content="one")
    xadd_tokens(first.pk, ["Half"])
    assert run_claim(run_id=first.pk, worker="dead-worker") is not None  # its lease lapses in 0.3 s, unextended
    b = _queue(chat, "three")
    queued_send_now(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk, queued_id=b.pk)
    settled = _settled(_started(b), first)
    assert settled.run.prompt_snapshot[-2] == {"role": "assistant", "content": "Half"}
    first.refresh_from_db()
    assert first.status == "cancelled" and first.finish_reason == "interrupted"


def _refused_for_two_at_once(chat):
    """The tenant may have one run at a time: a send now cannot start its message beside
    the reply it stops, only after it (the request's wait, or the reply's end)."""
    from chatsite.quotas.models import TenantQuota

    TenantQuota.objects.create(tenant=chat.tenant, max_concurrent_runs=1)


def test_a_message_its_door_refuses_beside_the_reply_starts_once_the_stop_is_written(chat):
    first = run_submit(chat=chat, content="one")
    xadd_tokens(first.pk, ["Half", " a"])
    b = _queue(chat, "three")
    _refused_for_two_at_once(chat)
    worker = _worker_stops_when_asked(first)
    sent = queued_send_now(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk, queued_id=b.pk)
    worker.join()
    # Started in the request after the stop: the stopped reply saved first, in the steered prompt as it is.
    assert sent.state == Q.STARTED and sent.run_id is not None
    first.refresh_from_db()
    assert first.status == "cancelled" and first.finish_reason == "interrupted"
    steered_run = _started(b)
    assert steered_run.prompt_snapshot[-2:] == [{"role": "assistant", "content": "Half a"},
                                                {"role": "user", "content": "three"}]
    assert GenerationRun.objects.filter(chat=chat).count() == 2


def test_a_reply_its_worker_saves_while_send_now_waits_leaves_its_message_to_the_request(chat, monkeypatch):
    first = run_submit(chat=chat, content="one")
    xadd_tokens(first.pk, ["Half", " a"])
    b = _queue(chat, "three")
    _refused_for_two_at_once(chat)
    worker = _worker_stops_when_asked(first)
    waited = log.wait_ended
    left = []

    def wait_while_the_worker_saves(run_id, *, timeout):
        ended = waited(run_id, timeout=timeout)
        assert run_finalize(run_id=run_id) == "cancelled"  # the worker's save, its end's signal sent
        b.refresh_from_db()
        left.append(b.state)
        return ended

    monkeypatch.setattr(log, "wait_ended", wait_while_the_worker_saves)
    sent = queued_send_now(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk, queued_id=b.pk)
    worker.join()
    assert left == [Q.QUEUED]  # the reply's end left the message to the request waiting for the stop
    assert sent.state == Q.STARTED and _started(b).user_message.parent_id == first.assistant_message_id
    assert GenerationRun.objects.filter(chat=chat).count() == 2


def test_a_stop_written_after_send_nows_wait_starts_the_message_at_the_replys_end(chat, monkeypatch):
    monkeypatch.setattr(send_now, "STOP_WAIT_SECONDS", 0.1)
    first = run_submit(chat=chat, content="one")
    xadd_tokens(first.pk, ["Half"])
    b = _queue(chat, "three")
    _refused_for_two_at_once(chat)
    worker = _worker_stops_when_asked(first, delay=0.5)  # a paused worker
    sent = queued_send_now(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk, queued_id=b.pk)
    assert sent.state == Q.QUEUED and sent.interrupted_run_id == first.pk  # asked, left to the reply's end
    worker.join()
    assert run_finalize(run_id=first.pk) == "cancelled"  # the worker saves it: its end starts the queue
    first.refresh_from_db()
    assert first.finish_reason == "interrupted"
    assert _started(b).user_message.parent_id == first.assistant_message_id


def test_the_sweep_starts_a_queue_whose_advance_was_lost_once(chat):
    first = run_submit(chat=chat, content="one")
    finish_run(first)  # ended with nothing queued; the message below came while its process died
    item = QueuedMessage.objects.create(chat=chat, tenant=chat.tenant, owner=chat.owner, content="late", position=0,
                                        request={})
    assert queues_sweep() == 0  # too fresh: an ending may be starting it right now
    QueuedMessage.objects.filter(pk=item.pk).update(updated_at=item.updated_at - timedelta(minutes=1))
    assert queues_sweep() == 1
    later = QueuedMessage.objects.create(chat=chat, tenant=chat.tenant, owner=chat.owner, content="later",
                                         position=1, request={})
    QueuedMessage.objects.filter(pk=later.pk).update(updated_at=later.updated_at - timedelta(minutes=1))
    assert queues_sweep() == 0  # the run "late" started is in progress: "later" waits for its end
    later.refresh_from_db()
    assert later.state == Q.QUEUED
    assert _started(item).user_message.content == "late" and GenerationRun.objects.count() == 2


def test_a_message_refused_when_its_turn_comes_is_marked_and_the_next_one_starts(chat):
    first = run_submit(chat=chat, content="one")
    a, b = _queue(chat, "two"), _queue(chat, "three")
    QueuedMessage.objects.filter(pk=a.pk).update(request={"model": "no-such-model"})
    finish_run(first)
    a.refresh_from_db()
    assert a.state == Q.REFUSED and "no-such-model" in a.error and a.run_id is None
    assert _started(b).user_message.content == "three"


def test_bad_messages_are_refused_when_queued_and_the_queue_has_a_limit(chat):
    run_submit(chat=chat, content="one")
    with pytest.raises(InvalidInput):
        message_send_or_queue(ask=_ask(chat, "   "))
    with pytest.raises(InvalidInput):
        message_send_or_queue(ask=_ask(chat, "x", temperature=9))
    for i in range(MAX_QUEUED_PER_CHAT):
        _queue(chat, f"m{i}")
    with pytest.raises(InvalidInput) as full:
        message_send_or_queue(ask=_ask(chat, "one more"))
    assert full.value.field == "queue"
    assert QueuedMessage.objects.count() == MAX_QUEUED_PER_CHAT


def test_a_repeat_with_the_same_idempotency_key_is_queued_once(chat):
    first = run_submit(chat=chat, content="one")
    a = _queue(chat, "two", key="k1")
    assert _queue(chat, "two", key="k1").pk == a.pk and QueuedMessage.objects.count() == 1
    finish_run(first)
    run = _started(a)
    again = message_send_or_queue(ask=_ask(chat, "two", key="k1"))  # after it started: its run, replayed
    assert isinstance(again, Admitted) and again.replayed and again.run.pk == run.pk


def test_a_message_refused_for_good_stays_listed_with_why_until_retried_or_withdrawn(chat):
    from chatsite.quotas.models import TenantQuota

    first = run_submit(chat=chat, content="one")
    a, b = _queue(chat, "two"), _queue(chat, "three")
    quota = TenantQuota.objects.create(tenant=chat.tenant, token_budget=1, period=TenantQuota.Period.MONTH)
    finish_run(first)  # its tokens use the budget up: the queue's turn comes, and the door refuses both
    for item in (a, b):
        item.refresh_from_db()
        assert item.state == Q.REFUSED and "budget" in item.error and item.run_id is None
    assert [(m.pk, m.state) for m in queue_of(chat=chat)] == [(a.pk, Q.REFUSED), (b.pk, Q.REFUSED)]
    assert queued_places(chat=chat) == {}
    owner = dict(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk)
    with pytest.raises(Conflict):  # not waiting: it is retried, not sent now
        queued_send_now(**owner, queued_id=a.pk)
    assert queued_edit(**owner, queued_id=b.pk, content="three, shorter").state == Q.REFUSED
    assert queued_withdraw(**owner, queued_id=b.pk).state == Q.WITHDRAWN

    quota.token_budget = None
    quota.save()
    # Nothing was in progress: it started once committed.
    assert queued_retry(**owner, queued_id=a.pk).state == Q.STARTED
    assert _started(a).user_message.content == "two" and queue_of(chat=chat) == []
    with pytest.raises(Conflict):
        queued_retry(**owner, queued_id=a.pk)


def test_a_refusal_that_passes_leaves_the_message_waiting_with_why(chat):
    from chatsite.quotas.models import TenantQuota

    first = run_submit(chat=chat, content="one")
    item = _queue(chat, "two")
    busy = run_submit(chat=ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=chat.pool), content="elsewhere")
    TenantQuota.objects.create(tenant=chat.tenant, max_concurrent_runs=1)  # `busy` is the one run allowed
    finish_run(first)
    item.refresh_from_db()
    assert item.state == Q.QUEUED and "replies in progress" in item.error
    assert queue_of(chat=chat) == [item] and queued_places(chat=chat) == {item.pk: 1}
    finish_run(busy)
    assert queue_advance(chat_id=chat.pk) == item  # the sweep's next advance
    assert _started(item).user_message.content == "two"
    item.refresh_from_db()
    assert item.error == ""


def test_a_message_sent_between_a_replys_end_and_the_queues_start_waits_behind_the_queue(chat, monkeypatch):
    from chatsite.runs.admission import QueueWaiting, run_regenerate
    from chatsite.runs.services.queued import advance

    first = run_submit(chat=chat, content="one")
    a = _queue(chat, "two")
    monkeypatch.setattr(advance, "queue_advance", lambda chat_id: None)  # the moment before the queue starts
    finish_run(first)
    monkeypatch.undo()
    assert not GenerationRun.objects.filter(chat=chat, status__in=GenerationRun.ACTIVE).exists()

    plain = message_send_or_queue(ask=_ask(chat, "plain"), queue=False)  # no queue flag: queued all the same
    assert isinstance(plain, QueuedMessage)
    second = _started(a)  # and, once committed, the queue starts: "two" first
    assert second.user_message.content == "two" and queued_places(chat=chat) == {plain.pk: 1}
    with pytest.raises(QueueWaiting) as other_turn:  # any other turn: 409, naming the queue
        run_regenerate(chat=chat, message=first.assistant_message)
    assert other_turn.value.status == 409 and other_turn.value.code == "queue_waiting"
    assert GenerationRun.objects.count() == 2
    finish_run(second)
    assert _started(plain).user_message.parent_id == second.assistant_message_id
