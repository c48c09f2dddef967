"""The check a pooled Postgres connection passes on checkout, and what a failed one tells us.

psycopg_pool checks a connection when a request takes it; a dead one is thrown away and
the request tries the next after a backoff (1 s, then 2 s, ...). After a Postgres
restart every idle connection of the pool is dead, so with the stock check a request
walked through them one backoff at a time and timed out, and so did the next: a pool
of 24 refused requests for tens of seconds after Postgres was back. A connection that
fails its check means the server dropped us, so every other idle one is replaced at
once (in the background), and the request waits for one backoff at most.
"""
import logging
import threading

from psycopg_pool import ConnectionPool

log = logging.getLogger(__name__)

_refreshing = threading.Lock()


def check_pooled_connection(conn) -> None:
    try:
        ConnectionPool.check_connection(conn)
    except Exception:
        _replace_idle_connections()
        raise


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
