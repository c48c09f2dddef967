"""The pooled connection's checkout check (chatsite/runs/store/backend/checkout.py): no round trip for a
quiet connection checked a moment ago; a round trip again once it has been idle; and a
connection the server dropped fails at once, whenever it was last checked."""
import time

import psycopg
import pytest
from django.conf import settings
from psycopg_pool import ConnectionPool

from chatsite.runs.store.backend import checkout as db_pool


def _connect():
    db = settings.DATABASES["default"]
    return psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"] or "postgres",
                           dbname="postgres", autocommit=True)


@pytest.fixture
def round_trips(monkeypatch):
    calls, real = [], ConnectionPool.check_connection
    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(lambda conn: calls.append(conn) or real(conn)))
    monkeypatch.setattr(db_pool, "_replace_idle_connections", lambda: calls.append("refresh"))
    return calls


def test_a_quiet_connection_checked_a_moment_ago_costs_no_round_trip(round_trips):
    with _connect() as conn:
        db_pool.check_pooled_connection(conn)
        db_pool.check_pooled_connection(conn)
        db_pool.check_pooled_connection(conn)
    assert len(round_trips) == 1


def test_a_connection_idle_for_longer_gets_the_round_trip_again(round_trips, monkeypatch):
    monkeypatch.setattr(db_pool, "QUIET_SECONDS", 0.05)
    with _connect() as conn:
        db_pool.check_pooled_connection(conn)
        time.sleep(0.1)
        db_pool.check_pooled_connection(conn)
    assert len(round_trips) == 2


def test_a_connection_left_in_a_transaction_gets_the_round_trip(round_trips):
    with _connect() as conn:
        db_pool.check_pooled_connection(conn)
        conn.autocommit = False
        conn.execute("select 1")  # now INTRANS: not quiet, whatever the clock says
        assert not db_pool._quiet(conn)
        conn.rollback()
        conn.autocommit = True


def test_a_connection_the_server_dropped_fails_its_check_at_once(round_trips):
    with _connect() as conn, _connect() as admin:
        db_pool.check_pooled_connection(conn)  # checked just now: quiet, were it not for the drop
        admin.execute("select pg_terminate_backend(%s)", [conn.info.backend_pid])
        deadline = time.monotonic() + 5
        while db_pool._quiet(conn) and time.monotonic() < deadline:  # the goodbye reaches the socket
            time.sleep(0.01)
        with pytest.raises(psycopg.OperationalError):
            db_pool.check_pooled_connection(conn)
    assert round_trips[-1] == "refresh"  # and the pool's other idle connections are checked
