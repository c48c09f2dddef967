"""A pooled connection keeps the hot path's marked statements prepared, and only those."""
import psycopg
import pytest
from django.db import connection

from chatsite import rows
from chatsite.pg_backend.base import DatabaseWrapper
from chatsite.runs.services import admission, claim, finalize

pytestmark = pytest.mark.django_db


def _prepared(conn) -> set[str]:
    with conn.cursor() as cur:
        cur.execute("SELECT statement FROM pg_prepared_statements", prepare=False)
        return {r[0] for r in cur.fetchall()}


def test_marked_statements_are_prepared_on_first_run_and_others_never():
    settings = {**connection.settings_dict, "OPTIONS": {**connection.settings_dict["OPTIONS"], "server_side_binding": True}}
    params = DatabaseWrapper(settings).get_connection_params()  # the pooled engine's connections
    marked = rows.prepared("SELECT %s::int + 1")
    unmarked = "SELECT %s::int + 2"
    with psycopg.connect(**params) as conn:
        with conn.cursor() as cur:
            cur.execute(marked, [1])
            assert cur.fetchone() == (2,)
            for i in range(10):  # psycopg's own threshold would have prepared it after 5
                cur.execute(unmarked, [i])
                assert cur.fetchone() == (i + 2,)
        statements = _prepared(conn)
    assert statements == {"SELECT $1::int + 1"}


def test_the_statements_with_a_skew_sensitive_plan_are_not_marked():
    """Prepared, they could run on a generic plan: the reply-in-progress check of a new
    chat scanned every run when one chat held most of them (rows.prepared)."""
    from chatsite.runs.services import shedding

    for sql in (admission._BUSY_AND_LEAF, shedding._QUEUED, shedding._FINISHED):
        assert sql not in rows.PREPARED
    for sql in (admission._LOCK_CHAT, claim._CLAIM, finalize._FINALIZE):
        assert sql in rows.PREPARED
