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
    assert taken.status == GenerationRun.Status.RUNNING and taken.attempt == 1
    ending = finalize.Ending(status=GenerationRun.Status.COMPLETED, finished_at=timezone.now(), finish_reason="stop",
                             completion_tokens=2, prompt_tokens=4, error=None,
                             first_token_at=timezone.now().astimezone(dt_timezone.utc), itl_ms=1.5, logprobs="[]", details=None,
                             text="Hi!")
    with django_assert_num_queries(1):
        finished = finalize.run_finish(run_id=run.pk, ending=ending)
    assert finished.run.status == "completed" and finished.pool_name == chat.pool.name
    assert finished.queue_waiting is False
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


def _ending(status: str = GenerationRun.Status.COMPLETED, reason: str = "stop") -> finalize.Ending:
    return finalize.Ending(status=status, finished_at=timezone.now(), finish_reason=reason, completion_tokens=2,
                           prompt_tokens=4, error=None, first_token_at=None, itl_ms=None, logprobs="[]",
                           details=None, text="Hi!")


def test_a_replys_token_ids_are_kept_by_its_finish_and_read_by_the_next_turn_in_one_statement(
        chat, django_assert_num_queries):
    first = run_submit(chat=chat, content="hello", max_tokens=5)
    claim.run_take(run_id=first.pk, worker="w1", now=timezone.now())
    ids = [0, 1, 2**32 - 1, 49151, 7]
    with django_assert_num_queries(1):
        finalize.run_finish(run_id=first.pk, ending=_ending(), tokens=TokenRecord(ids, "d" * 32))
    second = run_submit(chat=chat, content="again", max_tokens=5)
    with django_assert_num_queries(1):
        kept = tokens.tokens_builds_on(asked_id=second.user_message_id, reply_id=second.assistant_message_id,
                                       continued=False)
    assert kept == TokenRecord(ids, "d" * 32)
    # A failed reply keeps none; the turn after it gets none.
    claim.run_take(run_id=second.pk, worker="w1", now=timezone.now())
    finalize.run_finish(run_id=second.pk, ending=_ending(GenerationRun.Status.FAILED),
                        tokens=TokenRecord([1], "e" * 32))
    third = run_submit(chat=chat, content="once more", max_tokens=5)
    assert tokens.tokens_builds_on(asked_id=third.user_message_id, reply_id=third.assistant_message_id,
                                   continued=False) is None
    # A continue builds on the reply it carries on (the one its own reply replaces).
    claim.run_take(run_id=third.pk, worker="w1", now=timezone.now())
    finalize.run_finish(run_id=third.pk, ending=_ending(reason="length"), tokens=TokenRecord([3, 4], "f" * 32))
    continued = run_continue(chat=chat, message=third.assistant_message)
    assert tokens.tokens_builds_on(asked_id=continued.user_message_id, reply_id=continued.assistant_message_id,
                                   continued=True) == TokenRecord([3, 4], "f" * 32)
