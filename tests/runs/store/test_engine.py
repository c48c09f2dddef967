"""The store's engine: a pooled connection keeps the statements it marks prepared, and only those."""
import psycopg
import pytest
from django.db import connection

from chatsite.runs.store.backend.base import DatabaseWrapper
from chatsite.runs.store import engine

pytestmark = pytest.mark.django_db


def _prepared(conn) -> set[str]:
    with conn.cursor() as cur:
        cur.execute("SELECT statement FROM pg_prepared_statements", prepare=False)
        return {r[0] for r in cur.fetchall()}


def test_marked_statements_are_prepared_on_first_run_and_others_never():
    settings = {**connection.settings_dict, "OPTIONS": {**connection.settings_dict["OPTIONS"], "server_side_binding": True}}
    params = DatabaseWrapper(settings).get_connection_params()  # the pooled engine's connections
    marked = engine.prepared("SELECT %s::int + 1")
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
