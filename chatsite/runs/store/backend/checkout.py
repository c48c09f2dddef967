"""The check a pooled Postgres connection passes on checkout, and what a failed one tells us.

psycopg_pool checks a connection when a request takes it; a dead one is thrown away and
the request tries the next after a backoff (1 s, then 2 s, ...). After a Postgres
restart every idle connection of the pool is dead, so with the stock check a request
walked through them one backoff at a time and timed out, and so did the next: a pool
of 24 refused requests for tens of seconds after Postgres was back. A connection that
fails its check means the server dropped us, so every other idle one is replaced at
once (in the background), and the request waits for one backoff at most.

The check costs no round trip when the connection is quiet: idle, in a good state,
nothing to read on its socket (a server that restarted or dropped the connection has
sent its goodbye or closed it, which makes the socket readable), and checked less than
QUIET_SECONDS ago. Otherwise it is psycopg_pool's round trip. A connection checked out
at every run (three a run: the POST, the claim, the finalize) skipped ~30 us of client
CPU and a Postgres round trip each time; one idle for longer (a network partition
sends no goodbye) still gets the round trip.
"""
import logging
import select
import threading
import time

from psycopg import pq
from psycopg_pool import ConnectionPool

log = logging.getLogger(__name__)

_refreshing = threading.Lock()


QUIET_SECONDS = 2.0


def check_pooled_connection(conn) -> None:
    if _quiet(conn):
        return
    try:
        ConnectionPool.check_connection(conn)
    except Exception:
        _replace_idle_connections()
        raise
    conn._chatsite_checked_at = time.monotonic()


def _quiet(conn) -> bool:
    """Whether the connection passed a check less than QUIET_SECONDS ago and nothing
    has happened to it since: idle, in a good state, and nothing on its socket."""
    checked = getattr(conn, "_chatsite_checked_at", None)
    if checked is None or time.monotonic() - checked > QUIET_SECONDS:
        return False
    pgconn = conn.pgconn
    if pgconn.status != pq.ConnStatus.OK or pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return False
    try:
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


def _replace_idle_connections() -> None:
    if not _refreshing.acquire(blocking=False):
        return  # one refresh at a time; it covers every idle connection
    threading.Thread(target=_refresh, name="db-pool-refresh", daemon=True).start()


def _refresh() -> None:
    from django.db import connections  # settings import this module

    try:
        pool = connections["default"].pool
        if pool is not None:
            log.warning("a pooled Postgres connection was dead; checking every idle one")
            pool.check()  # tests each idle connection, replaces the broken ones
    except Exception:
        log.exception("refreshing the Postgres pool failed")
    finally:
        _refreshing.release()
