"""The test session's flush (tests/db_backend/) survives losing a deadlock to a live process."""
import threading
import time

import psycopg
import pytest
from django.core.management.color import no_style
from django.db import connection
from django.db.backends.postgresql import operations

from chatsite.chats.models import Chat, Message
from tests.factories import ChatFactory


@pytest.mark.django_db(transaction=True)
def test_a_flush_chosen_as_a_deadlocks_victim_is_tried_again(monkeypatch):
    ChatFactory()
    tries = []
    djangos = operations.DatabaseOperations.execute_sql_flush

    def counted(self, sql_list):
        tries.append(len(tries) + 1)
        return djangos(self, sql_list)

    monkeypatch.setattr(operations.DatabaseOperations, "execute_sql_flush", counted)
    first, second = Chat._meta.db_table, Message._meta.db_table
    params = connection.get_connection_params()
    holding = threading.Event()

    def live_process():
        # Holds the flush's second table and, once the flush waits for it (holding the first),
        # asks for the first: the flush, waiting longer, meets the deadlock check first and is its victim.
        with psycopg.connect(**params, autocommit=False) as other, psycopg.connect(**params, autocommit=True) as watch:
            other.execute(f'LOCK TABLE "{second}" IN ROW SHARE MODE')
            holding.set()
            end = time.monotonic() + 10
            while not watch.execute("SELECT 1 FROM pg_locks WHERE relation = %s::regclass AND NOT granted",
                                    [second]).fetchone():
                assert time.monotonic() < end, "the flush never waited for the held table"
                time.sleep(0.01)
            other.execute(f'LOCK TABLE "{first}" IN ROW SHARE MODE')
            other.commit()

    thread = threading.Thread(target=live_process)
    thread.start()
    assert holding.wait(10)
    connection.ops.execute_sql_flush(connection.ops.sql_flush(no_style(), [first, second]))
    thread.join(10)
    assert not thread.is_alive() and not Chat.objects.exists()
    assert len(tries) == 2  # the first try was the deadlock's victim, the second flushed
