"""The router's test of a pinned worker, from the figures its heartbeat publishes."""
import pytest
from django.conf import settings

from chatsite.runs.routing import worker_is_available

BEAT = {"pool": "flagship", "ready": "1", "draining": "0", "kv_cache_usage": "0.1", "waiting": "0",
        "active_runs": "3", "slots": "4"}


def test_a_pinned_worker_with_a_slot_free_takes_the_chats_next_turn():
    assert worker_is_available(BEAT, "flagship")


def test_a_pinned_worker_with_every_slot_taken_spills_the_turn_to_the_fair_queue():
    assert not worker_is_available({**BEAT, "active_runs": "4"}, "flagship")


@pytest.mark.parametrize("change", [{"draining": "1"}, {"ready": "0"}, {"pool": "small"}, {"waiting": "99"}])
def test_a_draining_cold_foreign_or_hot_worker_takes_no_pinned_turn(change):
    assert not worker_is_available({**BEAT, **change}, "flagship")


def test_without_the_fair_queue_a_full_worker_still_takes_its_chats_turns(monkeypatch):
    monkeypatch.setattr(settings, "CHATSITE", {**settings.CHATSITE, "FAIR_QUEUE": False})
    assert worker_is_available({**BEAT, "active_runs": "4"}, "flagship")
