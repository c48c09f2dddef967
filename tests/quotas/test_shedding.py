"""Load shedding at the edge: a pool over its queue limits refuses with 503 and Retry-After."""
import pytest

from chatsite.errors import Overloaded
from chatsite.runs.models import GenerationRun
from chatsite.runs.admission import run_submit
from tests.factories import ChatFactory, queueing_pool

pytestmark = pytest.mark.django_db


def test_pool_over_its_queue_limit_refuses_with_retry_after(tenant, user):
    pool = queueing_pool("tiny-queue", max_queued_runs=2)  # no worker: its runs stay queued
    chats = [ChatFactory(tenant=tenant, owner=user, pool=pool) for _ in range(3)]
    run_submit(chat=chats[0], content="one")
    run_submit(chat=chats[1], content="two")  # nothing consumes this pool: both stay queued
    with pytest.raises(Overloaded) as info:
        run_submit(chat=chats[2], content="three")
    assert info.value.status == 503 and info.value.retry_after >= 1
    assert "waiting" in info.value.message
    assert GenerationRun.objects.filter(pool=pool).count() == 2 and chats[2].messages.count() == 0


def test_expected_wait_over_the_limit_is_shed(tenant, user):
    from datetime import timedelta

    from django.utils import timezone

    pool = queueing_pool("slow-pool", max_queued_runs=100, max_queue_wait_seconds=5)
    chats = [ChatFactory(tenant=tenant, owner=user, pool=pool) for _ in range(5)]
    done = run_submit(chat=chats[0], content="finished one")
    GenerationRun.objects.filter(pk=done.pk).update(status="completed", finished_at=timezone.now() - timedelta(seconds=5))
    run_submit(chat=chats[1], content="waiting")  # nothing waited yet: admitted
    # one run finished in the last minute and one waits: a new one would wait ~60 s, over the 5 s limit
    with pytest.raises(Overloaded) as info:
        run_submit(chat=chats[2], content="one too many")
    assert "would wait about 60 s" in info.value.message and info.value.retry_after == 55


def test_http_answer_is_503_with_retry_after(client, tenant, user):
    pool = queueing_pool("full-pool", max_queued_runs=1)
    a, b = ChatFactory(tenant=tenant, owner=user, pool=pool), ChatFactory(tenant=tenant, owner=user, pool=pool)
    client.force_login(user)
    assert client.post(f"/api/chats/{a.pk}/messages/", {"content": "hi"}, content_type="application/json").status_code == 202
    resp = client.post(f"/api/chats/{b.pk}/messages/", {"content": "hi"}, content_type="application/json")
    assert resp.status_code == 503 and int(resp["Retry-After"]) >= 1
    assert resp.json()["error"]["code"] == "overloaded"


def test_a_tenant_at_its_share_of_a_full_queue_is_refused_and_another_is_admitted(tenant, user):
    from tests.factories import TenantFactory, UserFactory

    pool = queueing_pool("shared-queue", max_queued_runs=4)
    other = TenantFactory()
    other_user = UserFactory(tenant=other)
    for i in range(4):  # the noisy tenant fills the whole queue: idle capacity goes to whoever asks
        run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=pool), content=f"flood {i}")
    with pytest.raises(Overloaded) as info:
        run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=pool), content="one more")
    assert "4 requests waiting" in info.value.message and "all of them are yours" in info.value.message
    # the quiet tenant holds less than its share (4 / 2 tenants): admitted though the pool is over its limit
    quiet = [run_submit(chat=ChatFactory(tenant=other, owner=other_user, pool=pool), content=f"quiet {i}")
             for i in range(2)]
    assert all(run.status == "queued" for run in quiet)
    with pytest.raises(Overloaded) as info:  # the noisy tenant is still over its share
        run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=pool), content="one more")
    assert "4 of them are yours" in info.value.message and "4 / 2 tenants waiting = 2" in info.value.message
    with pytest.raises(Overloaded) as info:  # now it holds its share too
        run_submit(chat=ChatFactory(tenant=other, owner=other_user, pool=pool), content="quiet 3")
    assert "2 of them are yours" in info.value.message
    assert GenerationRun.objects.filter(pool=pool, tenant=other).count() == 2


def test_without_fair_ordering_a_full_queue_refuses_every_tenant(tenant, user, settings):
    from tests.factories import TenantFactory, UserFactory

    settings.CHATSITE = {**settings.CHATSITE, "FAIR_QUEUE": False}
    pool = queueing_pool("fifo-queue", max_queued_runs=2)
    for i in range(2):
        run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=pool), content=f"flood {i}")
    other = TenantFactory()
    with pytest.raises(Overloaded):
        run_submit(chat=ChatFactory(tenant=other, owner=UserFactory(tenant=other), pool=pool), content="quiet")


def test_a_quiet_tenants_expected_wait_counts_its_turns_not_the_whole_queue(tenant, user):
    from datetime import timedelta

    from django.utils import timezone

    from tests.factories import TenantFactory, UserFactory

    pool = queueing_pool("busy-shared", max_queued_runs=100, max_queue_wait_seconds=150)
    done = run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=pool), content="finished one")
    GenerationRun.objects.filter(pk=done.pk).update(status="completed", finished_at=timezone.now() - timedelta(seconds=5))
    for i in range(3):  # 3 waiting at one finished run a minute: the noisy tenant's next would wait ~180 s
        run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=pool), content=f"flood {i}")
    with pytest.raises(Overloaded) as info:
        run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=pool), content="one too many")
    assert "would wait about 180 s" in info.value.message
    # the quiet tenant's run comes after one turn of the noisy tenant: ~60 s, within the limit
    other = TenantFactory()
    run = run_submit(chat=ChatFactory(tenant=other, owner=UserFactory(tenant=other), pool=pool), content="quiet")
    assert run.status == "queued"


def test_a_call_of_several_choices_may_not_take_the_queue_past_its_limit(tenant, user):
    pool = queueing_pool("choices-queue", max_queued_runs=4)  # no worker: its runs stay queued
    chats = [ChatFactory(tenant=tenant, owner=user, pool=pool) for _ in range(3)]
    run_submit(chat=chats[0], content="one", choices=2)  # 2 of 4 queued
    with pytest.raises(Overloaded) as info:
        run_submit(chat=chats[1], content="three of them", choices=3)  # 5 > 4
    assert "the 3 runs of this request do not fit" in info.value.message
    assert GenerationRun.objects.filter(pool=pool).count() == 2 and chats[1].messages.count() == 0
    run_submit(chat=chats[2], content="two fit", choices=2)  # exactly 4
    assert GenerationRun.objects.filter(pool=pool).count() == 4


def test_a_burst_into_a_quiet_pool_takes_its_free_slots_before_its_wait_is_counted(tenant, user):
    """The finish rate of a pool that was quiet says what it was asked for, not what it can
    do: runs that its workers' free slots take at once wait for nothing."""
    from datetime import timedelta

    from django.utils import timezone

    from chatsite.runs.services import shedding
    from tests.heartbeat import beat

    pool = queueing_pool("burst-pool", max_queued_runs=100, max_queue_wait_seconds=5)
    submit = lambda text: run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=pool), content=text)  # noqa: E731
    done = submit("finished one")  # one run finished in the last minute: ~60 s a run by the rate alone
    GenerationRun.objects.filter(pk=done.pk).update(status="completed", finished_at=timezone.now() - timedelta(seconds=5))
    beat("burst-worker", pool.name, slots=4)
    running = submit("running")
    GenerationRun.objects.filter(pk=running.pk).update(status="running")  # 3 of the 4 slots free
    queued = [submit(f"burst {i}") for i in range(4)]  # the first waits for none; the next 3 take the free slots
    assert all(run.status == "queued" for run in queued)
    with pytest.raises(Overloaded) as info:  # 4 queued, 3 slots free: one run ahead of it waits ~60 s
        submit("one too many")
    assert "would wait about 60 s" in info.value.message
    beat("draining-worker", pool.name, slots=4, draining=True)  # takes no work: its slots are not free
    beat("loading-worker", pool.name, slots=4, ready=False)
    shedding.forget_memos()  # heartbeats are read at most once a second
    with pytest.raises(Overloaded):
        submit("one too many")
    beat("another-worker", pool.name, slots=1)  # 5 slots, 1 running: the 4 queued all start at once
    with pytest.raises(Overloaded):  # within the second: the slots read before it
        submit("one too many")
    shedding.forget_memos()
    assert submit("fits now").status == "queued"


def test_a_pools_finished_runs_are_counted_at_most_once_a_second(tenant, user, monkeypatch):
    """The count of a pool's finished runs grows with its throughput: admissions within a
    second share one."""
    from chatsite.runs.services import shedding

    pool = queueing_pool("memo-pool", max_queued_runs=100)
    submit = lambda text: run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=pool), content=text)  # noqa: E731
    submit("first")  # queued: every run after it would wait, so its admission reads the finish rate
    clock, reads = [1000.0], []
    monkeypatch.setattr(shedding.time, "monotonic", lambda: clock[0])
    finished_since = shedding.store.finished_since
    monkeypatch.setattr(shedding.store, "finished_since", lambda **kw: reads.append(kw) or finished_since(**kw))

    def counts(text: str) -> int:
        before = len(reads)
        submit(text)
        return len(reads) - before

    assert [counts("second"), counts("third")] == [1, 0]
    clock[0] += shedding.MEMO_SECONDS
    assert counts("fourth") == 1


def test_past_the_free_slots_a_burst_waits_by_what_the_workers_can_finish(tenant, user):
    """A quiet minute's finish rate is its demand: once the slots are full, they free at
    slots / (a run's mean time) runs a second at least."""
    from datetime import timedelta

    from django.utils import timezone

    from chatsite.runs.services import shedding
    from tests.heartbeat import beat, gone

    pool = queueing_pool("capacity-pool", max_queued_runs=100, max_queue_wait_seconds=5)
    submit = lambda text: run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=pool), content=text)  # noqa: E731
    done = submit("finished one")  # one run in the last minute, 2 s from its start to its finish
    finished = timezone.now() - timedelta(seconds=5)
    GenerationRun.objects.filter(pk=done.pk).update(status="completed", started_at=finished - timedelta(seconds=2),
                                                    finished_at=finished)
    beat("capacity-worker", pool.name, slots=2)
    for text in ("running 1", "running 2"):  # the 2 slots full
        GenerationRun.objects.filter(pk=submit(text).pk).update(status="running")
    queued = [submit(f"burst {i}") for i in range(4)]  # 3 ahead of the last: 2 slots free a run a second
    assert all(run.status == "queued" for run in queued)
    gone("capacity-worker", pool.name)  # no worker's slots to count on: the finish rate alone, 4 ahead = 240 s
    shedding.forget_memos()  # (heartbeats are read at most once a second)
    with pytest.raises(Overloaded) as info:
        submit("one too many")
    assert "would wait about 240 s" in info.value.message


def _v1_call(tenant, user, content):
    """A /v1 call's admission: a new chat (unlisted) and its run, through the door."""
    from chatsite.runs.admission import Ask, Caller, NewChat, Send, run_admit

    admitted = run_admit(Ask(caller=Caller(tenant, user), where=NewChat(model="v1-queue", listed=False),
                             turn=Send(content), source=GenerationRun.Source.OPENAI))
    return admitted.chat, admitted.run


def test_a_v1_call_is_shed_by_its_pools_queue_and_writes_nothing(tenant, user):
    from chatsite.chats.models import Chat

    queueing_pool("v1-queue", max_queued_runs=2)  # no worker: its runs stay queued
    _v1_call(tenant, user, "one")
    _v1_call(tenant, user, "two")
    chats = Chat.objects.count()
    with pytest.raises(Overloaded) as info:
        _v1_call(tenant, user, "three")
    assert "2 requests waiting" in info.value.message
    assert Chat.objects.count() == chats and GenerationRun.objects.filter(pool__name="v1-queue").count() == 2


def test_a_rest_message_is_shed_by_its_chats_pool_queue(client, tenant, user):
    pool = queueing_pool("rest-queue", max_queued_runs=1)
    a, b = ChatFactory(tenant=tenant, owner=user, pool=pool), ChatFactory(tenant=tenant, owner=user, pool=pool)
    client.force_login(user)
    resp = client.post(f"/api/chats/{a.pk}/messages/", {"content": "hi"}, content_type="application/json")
    assert resp.status_code == 202
    resp = client.post(f"/api/chats/{b.pk}/messages/", {"content": "hi"}, content_type="application/json")
    assert resp.status_code == 503 and "1 requests waiting" in resp.json()["error"]["message"]
