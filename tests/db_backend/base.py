"""Django's Postgres backend for the test session, with a cheaper flush.

A transactional test (``django_db(transaction=True)``, every test of the live stack) ends with
Django's ``flush``: one ``TRUNCATE`` of every table, then ``post_migrate`` writing the content
types and permissions again. Postgres makes a new file for every table it truncates, and the
refill commits once per app: together ~1 s a test on this machine, where deleting the few rows a
test wrote takes milliseconds. So the flush here locks the tables as ``TRUNCATE`` does (a live
process's write waits for it as before), deletes every row (Django's foreign keys are checked at
the commit, so the order does not matter), and keeps the two tables ``post_migrate`` would refill
with the same rows (``kept_models``; tests/conftest.py turns the refill off and fails the session
if a test changed them). A flush that resets sequences or cascades is Django's
``TRUNCATE``, of the same tables."""
from django.db import OperationalError
from django.db.backends.postgresql import base, operations

DEADLOCK = "40P01"


def kept_models() -> tuple:
    """The models whose tables a flush keeps: the rows post_migrate would write again."""
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    return ContentType, Permission


class DatabaseOperations(operations.DatabaseOperations):
    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        kept = {model._meta.db_table for model in kept_models()}
        tables = [table for table in tables if table not in kept]
        if not tables or reset_sequences or allow_cascade:
            return super().sql_flush(style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        names = [self.quote_name(table) for table in tables]
        return [f"LOCK TABLE {', '.join(names)} IN ACCESS EXCLUSIVE MODE", *(f"DELETE FROM {name}" for name in names)]

    def execute_sql_flush(self, sql_list):
        """Django's, tried again when Postgres chose it as a deadlock's victim: the LOCK takes the
        tables one by one, and a live process's transaction may hold one of them and wait for
        another (its whole transaction rolled back, so a second try starts clean)."""
        for attempt in range(3):
            try:
                return super().execute_sql_flush(sql_list)
            except OperationalError as exc:
                if getattr(exc.__cause__, "sqlstate", None) != DEADLOCK or attempt == 2:
                    raise


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
