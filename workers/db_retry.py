"""Retrying a service call across a Postgres restart (the worker must not lose a finished run)."""
import logging
import time

from django.db import InterfaceError, OperationalError, close_old_connections, connection

log = logging.getLogger(__name__)

RETRY_SECONDS = 120.0


def with_db_retry(fn, *args, **kwargs):
    """Call fn; while Postgres is unreachable, reconnect and call it again (services are idempotent)."""
    deadline = time.monotonic() + RETRY_SECONDS
    delay = 0.1
    while True:
        try:
            return fn(*args, **kwargs)
        except (OperationalError, InterfaceError) as exc:
            if time.monotonic() > deadline:
                raise
            log.warning("postgres unavailable (%s); retrying %s in %.1f s", exc, fn.__name__, delay)
            connection.close()
            close_old_connections()
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
