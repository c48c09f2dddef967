"""The prefix index: digests that name a whole prefix in the engine's blocks, and the router
sending a run to the worker whose cache took the longest prefix of the reply it builds on."""
import random
import time
import uuid

import pytest

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs import prefix_index, queues
from chatsite.runs.models import GenerationRun
from chatsite.runs.routing import affinity_pin, queue_for
from tests.heartbeat import beat

BLOCK = 16


def ids(count: int) -> list[int]:
    return [random.randrange(1, 50_000) for _ in range(count)]


def test_the_same_ids_give_the_same_digests():
    tokens = ids(40 * BLOCK + 5)
    assert prefix_index.chain(tokens, block=BLOCK) == prefix_index.chain(list(tokens), block=BLOCK)


def test_a_changed_block_changes_its_digest_and_every_later_one_only():
    tokens = ids(40 * BLOCK)
    changed = list(tokens)
    changed[20 * BLOCK + 3] += 1  # in block 21
    before = dict(prefix_index.chain(tokens, block=BLOCK, also=tuple(range(1, 41))))
    after = dict(prefix_index.chain(changed, block=BLOCK, also=tuple(range(1, 41))))
    assert [n for n in before if before[n] == after[n]] == list(range(1, 21))


def test_digests_end_at_every_sixteenth_block_the_last_full_block_and_the_ends_asked():
    links = prefix_index.chain(ids(40 * BLOCK + 5), block=BLOCK, also=(3, 0, 99))
    assert [n for n, _ in links] == [3, 16, 32, 40]  # 0 and 99 name no full block of these ids


def test_the_block_size_is_respected():
    tokens = ids(4 * 32)
    assert prefix_index.chain(tokens + ids(31), block=32) == prefix_index.chain(tokens, block=32)  # no partial block
    assert prefix_index.chain(tokens[:31], block=32) == []
    # the same ids in 16-token blocks are other blocks: digests of 32-token blocks do not match them
    assert dict(prefix_index.chain(tokens, block=16))[8] != dict(prefix_index.chain(tokens, block=32))[4]


@pytest.fixture
def names():
    """Three worker names of this test only (Redis is shared by the session)."""
    tag = uuid.uuid4().hex[:8]
    return [f"{w}-{tag}@host" for w in "abc"]


def run_in(chat) -> GenerationRun:
    return GenerationRun(chat=chat, pool=chat.pool, tier=GenerationRun.Tier.INTERACTIVE)


def hold(worker: str, token_ids: list[int], *, reply_id: int, built_on: int = 0) -> None:
    pipe = get_redis().pipeline(transaction=False)
    prefix_index.hold(pipe, pool="flagship", worker=worker, token_ids=token_ids, block=BLOCK, reply_id=reply_id,
                      built_on=built_on)
    pipe.execute()


def reply_id() -> int:
    return random.randrange(10**9, 10**12)


def test_a_branch_goes_to_the_worker_holding_its_prefix_not_to_the_chats_pin(chat, names):
    a, b, _ = names
    for worker in (a, b):
        beat(worker, "flagship")
    earlier = reply_id()
    hold(b, ids(10 * BLOCK), reply_id=earlier)
    affinity_pin(chat_id=chat.pk, worker=a)  # the chat's last turn ran on a
    assert queue_for(run_in(chat), builds_on=earlier) == queues.worker_queue(b)
    assert queue_for(run_in(chat)) == queues.worker_queue(a)  # no reply built on: the pin
    assert queue_for(run_in(chat), builds_on=reply_id()) == queues.worker_queue(a)  # a reply with no ids kept


def test_the_longest_prefix_held_wins_and_a_worker_that_cannot_take_it_is_skipped(chat, names):
    a, b, c = names
    history = ids(40 * BLOCK)
    # b's reply holds all 40 blocks; then c took the first 20 (another branch after them)
    second = reply_id()
    hold(b, history, reply_id=second)
    hold(c, history[:20 * BLOCK] + ids(5 * BLOCK), reply_id=reply_id(), built_on=20 * BLOCK)
    affinity_pin(chat_id=chat.pk, worker=a)
    for worker in names:
        beat(worker, "flagship")
    assert queue_for(run_in(chat), builds_on=second) == queues.worker_queue(b)
    beat(b, "flagship", waiting=99)  # hot: its next-best holder takes it
    assert queue_for(run_in(chat), builds_on=second) == queues.worker_queue(c)
    beat(c, "flagship", draining=True)
    assert queue_for(run_in(chat), builds_on=second) == queues.worker_queue(a)
    beat(a, "flagship", age=10)  # silent: nobody holds it, the pool's queue
    assert queue_for(run_in(chat), builds_on=second) == queues.pool_queue("flagship", GenerationRun.Tier.INTERACTIVE)


def test_a_sibling_branch_finds_the_worker_that_built_on_its_reply_last(chat, names):
    a, b, _ = names
    for worker in (a, b):
        beat(worker, "flagship")
    turn = ids(7 * BLOCK + 3)  # the shared reply's kept ids: its last full block is the 7th
    shared = reply_id()
    hold(a, turn, reply_id=shared)
    hold(b, turn + ids(50), reply_id=reply_id(), built_on=len(turn))  # the next turn, on b
    affinity_pin(chat_id=chat.pk, worker=a)
    assert queue_for(run_in(chat), builds_on=shared) == queues.worker_queue(b)  # b took the whole prefix last


def test_the_index_expires(chat, names, monkeypatch):
    a, b, _ = names
    for worker in (a, b):
        beat(worker, "flagship")
    monkeypatch.setattr(prefix_index, "TTL_SECONDS", 1)
    earlier = reply_id()
    hold(b, ids(3 * BLOCK), reply_id=earlier)
    affinity_pin(chat_id=chat.pk, worker=a)
    assert queue_for(run_in(chat), builds_on=earlier) == queues.worker_queue(b)
    time.sleep(1.1)
    for worker in (a, b):
        beat(worker, "flagship")
    assert queue_for(run_in(chat), builds_on=earlier) == queues.worker_queue(a)
    assert get_redis().get(redis_keys.reply_prefixes(earlier)) is None
