"""Each store call is the round trips it promises (one statement each, on the hot path of
every run), and returns what it read as fields, not as facts stuck on an instance."""
from datetime import timezone as dt_timezone

import pytest
from django.utils import timezone

from chatsite.chats.models import Message
from chatsite.runs.admission import run_continue, run_submit
from chatsite.runs.models import GenerationRun
from chatsite.runs.store import choices, claim, finalize, keys, queue, reads, tokens, turns
from chatsite.tenancy.credentials import key_parts
from inference.token_prefix import TokenRecord
from tests.factories import ChatFactory, TenantFactory
from tests.runs.helpers import run_ending

pytestmark = pytest.mark.django_db


def test_a_turns_reads_are_one_statement_each(chat, tenant, user, django_assert_num_queries):
    run_submit(chat=ChatFactory(tenant=tenant, owner=user, pool=chat.pool), content="queued")
    with django_assert_num_queries(1):
        read = reads.chat_for_turn(tenant=tenant, user_id=user.pk, chat_id=chat.pk)
    assert read.chat.pk == chat.pk and read.chat.pool.name == chat.pool.name
    assert read.queue == queue.QueueCounts(queued=1, mine=1, tenants=1)
    other = TenantFactory()
    with django_assert_num_queries(1):
        pool_read = reads.pool_for_turn(tenant_id=other.pk, name=chat.pool.name)
    assert pool_read.pool.pk == chat.pool_id and pool_read.queue == queue.QueueCounts(queued=1, mine=0, tenants=1)
    with django_assert_num_queries(0):  # a name no pool can have is not looked up
        assert reads.pool_for_turn(tenant_id=tenant.pk, name="no such\x00pool") == reads.PoolRead(None, None)


def test_a_turns_writes_are_one_statement_each(chat, django_assert_num_queries):
    from django.db import transaction

    with transaction.atomic():
        with django_assert_num_queries(1):
            lock = turns.chat_lock(chat_id=chat.pk)
        with django_assert_num_queries(1):
            end = turns.path_end(chat_id=chat.pk, leaf_id=lock.leaf_id)
        assert end == turns.PathEnd(active_run_id=None, leaf_id=None, leaf_depth=None, branched=False,
                                    queue_waiting=False)
        asked = Message(chat=chat, depth=0, role=Message.Role.USER, content="q", token_count=1)
        replies = [Message(chat=chat, parent=asked, depth=1, role=Message.Role.ASSISTANT) for _ in range(3)]
        with django_assert_num_queries(1):  # the question and its three replies
            turns.turn_insert(asked=asked, replies=replies)
        assert all(r.parent_id == asked.pk for r in replies)


def test_locking_a_chat_that_is_gone_is_not_found(chat):
    from django.db import transaction

    from chatsite.errors import NotFound

    gone = chat.pk
    chat.delete()
    with transaction.atomic(), pytest.raises(NotFound):
        turns.chat_lock(chat_id=gone)


def test_the_credentials_read_is_one_statement(api_key, tenant, django_assert_num_queries):
    prefix, _ = key_parts(api_key)
    with django_assert_num_queries(1):
        read = keys.live_key(prefix=prefix)
    assert read.key.tenant.pk == tenant.pk and read.limits.quota is None and read.limits.allowed_pool_ids == set()


def test_a_claim_and_a_finish_are_one_statement_each(chat, django_assert_num_queries):
    run = run_submit(chat=chat, content="hello", max_tokens=5)
    with django_assert_num_queries(1):
        taken = claim.run_take(run_id=run.pk, worker="w1", now=timezone.now())
    saved = GenerationRun.objects.get(pk=run.pk)  # each field of the claimed run as saved, under its new attempt
    assert saved.status == GenerationRun.Status.RUNNING and saved.attempt == 1 and saved.worker == "w1"
    assert taken.run == claim.ClaimedRun(**{name: getattr(saved, name) for name in claim.ClaimedRun.__slots__})
    assert taken.run.prompt_snapshot == [{"role": "user", "content": "hello"}] and taken.run.max_tokens == 5
    ending = finalize.Ending(status=GenerationRun.Status.COMPLETED, finished_at=timezone.now(), finish_reason="stop",
                             completion_tokens=2, prompt_tokens=4, error=None,
                             first_token_at=timezone.now().astimezone(dt_timezone.utc), itl_ms=1.5, logprobs="[]", details=None,
                             text="Hi!")
    with django_assert_num_queries(1):
        finished = finalize.run_finish(run_id=run.pk, ending=ending)
    assert finished == finalize.Finished(chat_id=chat.pk, status="completed", ttft_ms=finished.ttft_ms, itl_ms=1.5,
                                         pool_name=chat.pool.name, queue_waiting=False)
    assert finished.ttft_ms is not None and finished.ttft_ms >= 0
    assert Message.objects.get(pk=run.assistant_message_id).content == "Hi!"
    with django_assert_num_queries(1):  # terminal already: nothing changes
        assert finalize.run_finish(run_id=run.pk, ending=ending) is None
    with django_assert_num_queries(1):
        assert claim.run_take(run_id=run.pk, worker="w2", now=timezone.now()) is None


def test_a_completions_choices_are_one_statement(chat, django_assert_num_queries):
    first = run_submit(chat=chat, content="three ways", choices=3)
    with django_assert_num_queries(1):
        read = choices.run_choices(run_id=first.pk, tenant_id=chat.tenant_id)
    assert [c.choice_index for c in read] == [0, 1, 2] and all(c.pool.pk == chat.pool_id for c in read)


def test_a_workers_finish_after_a_web_processs_keeps_the_token_ids_and_changes_nothing_else(chat):
    """A /v1 call waiting for its whole reply finalizes the run from its stream (no ids); the
    worker's finish that follows finds the run ended, and still keeps the ids it brought."""
    run = run_submit(chat=chat, content="hello", max_tokens=5)
    claim.run_take(run_id=run.pk, worker="w1", now=timezone.now())
    assert finalize.run_finish(run_id=run.pk, ending=run_ending()) is not None  # the web's, first
    ended = GenerationRun.objects.get(pk=run.pk)
    assert finalize.run_finish(run_id=run.pk, ending=run_ending(), tokens=TokenRecord([8, 9], "a" * 32)) is None
    assert GenerationRun.objects.get(pk=run.pk).finished_at == ended.finished_at
    second = run_submit(chat=chat, content="again", max_tokens=5)
    assert claim.run_take(run_id=second.pk, worker="w1", now=timezone.now()).kept.after_question == TokenRecord(
        [8, 9], "a" * 32)


def test_a_replys_token_ids_are_kept_by_its_finish_and_read_by_the_next_turns_claim_in_one_statement(
        chat, django_assert_num_queries):
    first = run_submit(chat=chat, content="hello", max_tokens=5)
    assert claim.run_take(run_id=first.pk, worker="w1", now=timezone.now()).kept == tokens.Kept(None, None)
    ids = [0, 1, 2**32 - 1, 49151, 7]
    with django_assert_num_queries(1):
        finalize.run_finish(run_id=first.pk, ending=run_ending(), tokens=TokenRecord(ids, "d" * 32))
    second = run_submit(chat=chat, content="again", max_tokens=5)
    with django_assert_num_queries(1):
        taken = claim.run_take(run_id=second.pk, worker="w1", now=timezone.now())
    assert taken.run.id == second.pk and GenerationRun.objects.get(pk=second.pk).status == "running"
    assert taken.kept.builds_on(continued=False) == TokenRecord(ids, "d" * 32)
    assert taken.kept.builds_on(continued=True) is None  # it carries no reply on
    # A failed reply keeps none; the turn after it gets none.
    finalize.run_finish(run_id=second.pk, ending=run_ending(GenerationRun.Status.FAILED),
                        tokens=TokenRecord([1], "e" * 32))
    third = run_submit(chat=chat, content="once more", max_tokens=5)
    assert claim.run_take(run_id=third.pk, worker="w1", now=timezone.now()).kept.after_question is None
    # A continue builds on the reply it carries on (the one its own reply replaces).
    finalize.run_finish(run_id=third.pk, ending=run_ending(reason="length"), tokens=TokenRecord([3, 4], "f" * 32))
    continued = run_continue(chat=chat, message=third.assistant_message)
    kept = claim.run_take(run_id=continued.pk, worker="w1", now=timezone.now()).kept
    assert kept.builds_on(continued=True) == TokenRecord([3, 4], "f" * 32)
    assert kept.builds_on(continued=False) is None  # the reply before its question: the failed one


def test_a_tenants_limits_are_one_statement(tenant, django_assert_num_queries):
    from chatsite.quotas.models import TenantQuota
    from tests.factories import PoolFactory

    with django_assert_num_queries(1):
        limits = keys.tenant_limits(tenant_id=tenant.pk)
    assert limits.quota is None and limits.allowed_pool_ids == frozenset()  # no limits, every pool
    quota = TenantQuota.objects.create(tenant=tenant, token_budget=500, requests_per_minute=7)
    pools = [PoolFactory(name="tl-a"), PoolFactory(name="tl-b")]
    tenant.allowed_pools.set(pools)
    TenantQuota.objects.create(tenant=TenantFactory(), token_budget=1)  # another tenant's
    with django_assert_num_queries(1):
        limits = keys.tenant_limits(tenant_id=tenant.pk)
    assert limits.quota.pk == quota.pk and limits.quota.requests_per_minute == 7
    assert limits.allowed_pool_ids == frozenset(p.pk for p in pools)
