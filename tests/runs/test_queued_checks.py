"""What a queued message is checked against, when queued and when its turn comes
(chatsite.runs.services.queued): the tenant's rate (counted once), a refusal that passes
(tried again after its retry time), its sender's access, its own settings, its
Idempotency-Key; and the queue's advance against the other writers of a chat."""
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from chatsite.chats.models import QueuedMessage
from chatsite.errors import Conflict, InvalidInput, RateLimited
from chatsite.quotas.models import TenantQuota
from chatsite.runs.admission import Admitted, Ask, Caller, InChat, Send, run_submit
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.queued import add, advance, edit, rows
from chatsite.runs.services import run_finalize
from chatsite.runs.stream import codec
from chatsite.tenancy.models import Membership
from tests.factories import ChatFactory, PoolFactory, queueing_pool
from tests.runs.helpers import end_stream, xadd_tokens

pytestmark = pytest.mark.django_db(transaction=True)  # a run's end starts the queue after its commit
Q = QueuedMessage.State

DONE = codec.done_fields(finish_reason="stop", prompt_tokens=3, completion_tokens=1)


@pytest.fixture
def pool(db):
    """A pool no worker serves, even with the live stack up in this session: these tests
    commit, so their runs are dispatched, and they end the runs themselves."""
    return queueing_pool("unserved")


def _ask(chat, content, key="", **sampling):
    return Ask(caller=Caller(chat.tenant, chat.owner), where=InChat(chat.pk), turn=Send(content), sampling=sampling,
               idempotency_key=key)


def _queue(chat, content, **kw) -> QueuedMessage:
    sent = add.message_send_or_queue(ask=_ask(chat, content, **kw))
    assert isinstance(sent, QueuedMessage), sent
    return sent


def _finish(run):
    xadd_tokens(run.pk, ["Done."])
    end_stream(run.pk, DONE)
    run_finalize(run_id=run.pk)


def _waiting_row(chat, content, position, **fields) -> QueuedMessage:
    """A message queued a minute ago (the sweep leaves fresher ones to the ending starting them)."""
    item = QueuedMessage.objects.create(chat=chat, tenant=chat.tenant, owner=chat.owner, content=content,
                                        position=position, **{"request": {}, **fields})
    QueuedMessage.objects.filter(pk=item.pk).update(updated_at=timezone.now() - timedelta(minutes=1))
    return item


def _same_minute(seconds_needed=15):
    """Wait for a fresh minute if this one ends too soon: the rate counts per clock minute."""
    left = 60 - time.time() % 60
    if left < seconds_needed:
        time.sleep(left + 0.1)


def test_a_queued_message_counts_once_against_the_rate_not_again_when_it_starts(chat):
    _same_minute()
    TenantQuota.objects.create(tenant=chat.tenant, requests_per_minute=2)
    first = run_submit(chat=chat, content="one")  # 1
    item = _queue(chat, "two")  # 2: counted when queued
    _finish(first)
    item.refresh_from_db()
    assert item.state == Q.STARTED, item.error  # its start counted nothing more
    other = ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=chat.pool)
    with pytest.raises(RateLimited):  # 3 > 2: the queued message counted exactly once
        run_submit(chat=other, content="three")


def test_a_passing_refusal_waits_for_its_retry_time_and_the_sweep_costs_no_rate(chat):
    _same_minute()
    TenantQuota.objects.create(tenant=chat.tenant, requests_per_minute=3)
    cold = PoolFactory(name="cold-no-worker", queue_when_cold=False)  # no worker: 503, retry after 10 s
    item = _waiting_row(chat, "to the cold pool", 0, request={"model": cold.name})
    assert advance.queues_sweep() == 0
    item.refresh_from_db()
    assert item.state == Q.QUEUED and item.not_before > timezone.now() + timedelta(seconds=5)
    QueuedMessage.objects.filter(pk=item.pk).update(updated_at=timezone.now() - timedelta(minutes=1))
    for _ in range(5):  # before its retry time the sweep leaves it alone
        assert advance.queues_sweep() == 0
    item.refresh_from_db()
    assert item.updated_at < timezone.now() - timedelta(seconds=30)
    for content in ("a", "b", "c"):  # the tenant's minute is whole: none of it went to the sweeps
        run_submit(chat=ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=chat.pool), content=content)


def test_the_sweep_takes_each_chat_once_so_a_long_queue_starves_no_other(chat):
    crowded = ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=chat.pool)
    QueuedMessage.objects.bulk_create(
        QueuedMessage(chat=crowded, tenant=chat.tenant, owner=chat.owner, content=f"m{i}", position=i, request={})
        for i in range(advance.SWEEP_CHATS))
    QueuedMessage.objects.filter(chat=crowded).update(updated_at=timezone.now() - timedelta(seconds=30))
    lone = _waiting_row(chat, "me too", advance.SWEEP_CHATS)
    assert advance.queues_sweep() == 2
    lone.refresh_from_db()
    assert lone.state == Q.STARTED


def test_a_reply_ended_but_not_saved_is_saved_by_the_advance_which_then_starts_the_queue(chat):
    first = run_submit(chat=chat, content="one")
    xadd_tokens(first.pk, ["Uno"])
    end_stream(first.pk, DONE)  # its worker has not saved it yet: the door does, inside the advance
    a, b = _waiting_row(chat, "two", 0), _waiting_row(chat, "three", 1)
    started = advance.queue_advance(chat_id=chat.pk)
    assert started is not None and started.pk == a.pk
    first.refresh_from_db()
    assert first.status == "completed"  # the saving was not rolled back with a nested advance
    b.refresh_from_db()
    assert b.state == Q.QUEUED and GenerationRun.objects.filter(chat=chat).count() == 2


def test_a_deleted_chats_queue_starts_nothing(chat):
    item = _waiting_row(chat, "orphan", 0)
    gone = chat.pk
    chat.delete()
    assert advance.queue_advance(chat_id=gone) is None
    assert not QueuedMessage.objects.filter(pk=item.pk).exists()


LOST_ACCESS = {
    "removed from the tenant": lambda chat: Membership.objects.filter(tenant=chat.tenant, user=chat.owner).delete(),
    "deactivated": lambda chat: type(chat.owner).objects.filter(pk=chat.owner_id).update(is_active=False),
    "its tenant deactivated": lambda chat: type(chat.tenant).objects.filter(pk=chat.tenant_id).update(is_active=False),
}


@pytest.mark.parametrize("how", LOST_ACCESS)
def test_a_message_whose_sender_lost_access_is_refused_when_its_turn_comes(chat, how):
    first = run_submit(chat=chat, content="one")
    item = _queue(chat, "two")
    LOST_ACCESS[how](chat)
    _finish(first)
    item.refresh_from_db()
    assert item.state == Q.REFUSED and "access" in item.error and item.run_id is None
    assert GenerationRun.objects.filter(chat=chat).count() == 1


def test_an_edit_is_checked_as_the_message_it_is_with_its_own_settings(chat):
    run_submit(chat=chat, content="one")
    item = _queue(chat, "two", max_tokens=chat.pool.max_output_tokens)  # half the pool's context left for it
    owner = dict(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk)
    with pytest.raises(InvalidInput) as refused:  # ~700 tokens: room enough with the chat's default reply length
        edit.queued_edit(**owner, queued_id=item.pk, content="w" * 2100)
    assert refused.value.code == "context_length_exceeded"
    assert edit.queued_edit(**owner, queued_id=item.pk, content="two, short").content == "two, short"


def test_the_same_idempotency_key_with_another_message_is_refused(chat):
    run_submit(chat=chat, content="one")
    item = _queue(chat, "two", key="k1")
    assert _queue(chat, "two", key="k1").pk == item.pk
    for other in (lambda: add.message_send_or_queue(ask=_ask(chat, "not two", key="k1")),
                  lambda: add.message_send_or_queue(ask=_ask(chat, "two", key="k1", max_tokens=5))):
        with pytest.raises(Conflict) as reused:
            other()
        assert reused.value.code == "idempotency_key_reused"
    assert QueuedMessage.objects.count() == 1


def test_a_repeat_of_a_message_sent_at_once_is_replayed_even_while_others_wait(chat):
    sent = add.message_send_or_queue(ask=_ask(chat, "one", key="k0"))
    assert isinstance(sent, Admitted)
    _queue(chat, "two")
    again = add.message_send_or_queue(ask=_ask(chat, "one", key="k0"))
    assert isinstance(again, Admitted) and again.replayed and again.run.pk == sent.run.pk


def test_a_withdrawal_in_progress_does_not_hide_the_next_message_from_the_advance(chat, monkeypatch):
    first = run_submit(chat=chat, content="one")
    a, b = _queue(chat, "two"), _queue(chat, "three")
    end_stream(first.pk, DONE)
    inside, release = threading.Event(), threading.Event()
    changed = edit.changed

    def held(c):  # the withdrawal's transaction stays open here, its row updated
        changed(c)
        if threading.current_thread().name == "withdraw":
            inside.set()
            release.wait(10)

    monkeypatch.setattr(edit, "changed", held)

    def in_thread(act):
        try:
            act()
        finally:
            connection.close()

    withdraw = threading.Thread(name="withdraw", target=in_thread, args=(lambda: edit.queued_withdraw(
        tenant=chat.tenant, user=chat.owner, chat_id=chat.pk, queued_id=a.pk),))
    withdraw.start()
    assert inside.wait(10)
    ending = threading.Thread(target=in_thread, args=(lambda: run_finalize(run_id=first.pk),))
    ending.start()
    time.sleep(0.5)  # the ending's advance waits behind the withdrawal
    release.set()
    withdraw.join(10), ending.join(10)
    b.refresh_from_db()
    assert b.state == Q.STARTED, (b.state, b.error)


def test_the_queues_head_is_locked_alone_its_tenant_and_sender_stay_free_for_other_writers(chat):
    """The advance holds its head message's row for a whole admission: a lock on its tenant's
    or sender's row too would hold up every insert that refers to them (a chat, a run)."""
    item = _waiting_row(chat, "two", 0)
    outcome = {}

    def other_writer():
        try:
            with transaction.atomic():
                with connection.cursor() as cur:
                    cur.execute("SET LOCAL lock_timeout = '3s'")
                ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=chat.pool)
            outcome["wrote"] = True
        except Exception as exc:  # the lock's timeout
            outcome["error"] = repr(exc)
        finally:
            connection.close()

    with transaction.atomic():
        found = rows.queue_head(chat_id=chat.pk)
        writer = threading.Thread(target=other_writer)
        writer.start()
        writer.join(10)
    assert found.item.pk == item.pk and found.sender_member is True
    assert outcome == {"wrote": True}
