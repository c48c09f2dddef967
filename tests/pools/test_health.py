"""Does pool P have a live worker: one Redis read on the pool's own index."""
import time

import pytest

from chatsite import redis_keys
from chatsite.pools import health
from chatsite.redis_client import get_redis
from tests.heartbeat import beat, gone


class CountingRedis:
    """The real client, counting the commands sent."""

    def __init__(self, real):
        self.real, self.commands = real, []

    def __getattr__(self, name):
        attr = getattr(self.real, name)
        if not callable(attr) or name == "pipeline":
            return attr

        def call(*args, **kwargs):
            self.commands.append(name)
            return attr(*args, **kwargs)

        return call


@pytest.fixture
def counting(monkeypatch):
    client = CountingRedis(get_redis())
    monkeypatch.setattr(health, "get_redis", lambda: client)
    return client


def test_a_fresh_beat_answers_in_one_read(counting):
    beat("h1@host", "hp-one")
    assert health.pool_has_live_worker("hp-one") is True
    assert counting.commands == ["zcount"]


def test_stale_draining_and_stopped_workers_do_not_count():
    beat("h2@host", "hp-stale", age=health.STALE_SECONDS + 1)
    assert health.pool_has_live_worker("hp-stale") is False
    beat("h3@host", "hp-drain")
    assert health.pool_has_live_worker("hp-drain") is True
    beat("h3@host", "hp-drain", draining=True)
    assert health.pool_has_live_worker("hp-drain") is False  # draining: out of the index at once
    assert "h3@host" in health.live_workers()  # though it still beats
    beat("h4@host", "hp-stop")
    gone("h4@host", "hp-stop")
    assert health.pool_has_live_worker("hp-stop") is False


def test_a_worker_of_another_pool_does_not_count():
    beat("h5@host", "hp-other")
    assert health.pool_has_live_worker("hp-mine") is False


def test_a_loading_engine_counts_as_live():
    beat("h6@host", "hp-loading", ready=False)
    assert health.pool_has_live_worker("hp-loading") is True


def test_heartbeats_without_the_pool_index_still_count(counting):
    """A worker of the previous release (no pool index) during a rolling upgrade."""
    beat("h7@host", "hp-legacy", pool_index=False)
    assert health.pool_has_live_worker("hp-legacy") is True
    assert counting.commands[0] == "zcount"  # the one read first, the global index after it found none
    beat("h8@host", "hp-legacy-drain", pool_index=False, draining=True)
    assert health.pool_has_live_worker("hp-legacy-drain") is False


def test_the_pool_index_prunes_dead_members_and_expires():
    r = get_redis()
    key = redis_keys.pool_workers_index("hp-prune")
    r.zadd(key, {"dead@host": time.time() - health.POOL_INDEX_KEEP_SECONDS - 5})
    beat("h9@host", "hp-prune")
    assert r.zrange(key, 0, -1) == ["h9@host"]
    assert 0 < r.ttl(key) <= health.POOL_INDEX_TTL_SECONDS
