"""The migration to the evaluated demo defaults moves a demo pool still holding the old
defaults, and leaves an operator's own defaults and other pools as they are."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from chatsite.pools.demo import DEMO_SAMPLING

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("pools", "0005_modelpool_chat_template")]
AFTER = [("pools", "0006_demo_pools_default_sampling_from_eval")]
OLD = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 1024}


def migrate(target):
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def test_the_old_demo_defaults_move_to_the_evaluated_ones_and_nothing_else_does(tmp_path):
    apps = migrate(BEFORE)
    try:
        ModelPool = apps.get_model("pools", "ModelPool")
        mine = {"temperature": 0.9, "max_tokens": 100}
        for name, sampling in (("flagship", OLD), ("small", mine), ("other", OLD)):
            ModelPool.objects.create(name=name, display_name=name, model=str(tmp_path), default_sampling=sampling)
        migrate(AFTER)
        from chatsite.pools.models import ModelPool as Current

        got = dict(Current.objects.values_list("name", "default_sampling"))
        assert got == {"flagship": DEMO_SAMPLING, "small": mine, "other": OLD}
        migrate(BEFORE)  # and back
        assert Current.objects.get(name="flagship").default_sampling == OLD
    finally:
        migrate(AFTER)
