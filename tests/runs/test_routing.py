"""The router's test of a pinned worker, from the figures its heartbeat publishes."""
import pytest
from django.conf import settings

from chatsite.runs.routing import worker_for_choices, worker_is_available

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


def test_a_completions_choices_go_to_the_worker_with_the_most_free_slots():
    workers = {"a": {**BEAT, "active_runs": "2", "slots": "8"}, "b": {**BEAT, "active_runs": "1", "slots": "8"},
               "c": {**BEAT, "active_runs": "0", "slots": "8", "draining": "1"}}
    assert worker_for_choices(workers, "flagship", 3) == "b"


def test_choices_that_no_worker_has_the_slots_for_are_not_pinned():
    workers = {"a": {**BEAT, "active_runs": "2", "slots": "4"}, "b": {**BEAT, "pool": "small", "active_runs": "0"}}
    assert worker_for_choices(workers, "flagship", 3) is None
    assert worker_for_choices(workers, "flagship", 2) == "a"
    assert worker_for_choices({}, "flagship", 2) is None
