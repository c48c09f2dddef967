"""The test session's flush (tests/db_backend/) survives losing a deadlock to a live process."""
import threading

import psycopg
import pytest
from django.core.management.color import no_style
from django.db import connection

from chatsite.chats.models import Chat, Message
from tests.factories import ChatFactory


@pytest.mark.django_db(transaction=True)
def test_a_flush_chosen_as_a_deadlocks_victim_is_tried_again():
    ChatFactory()
    first, second = Chat._meta.db_table, Message._meta.db_table
    params = connection.get_connection_params()
    holding = threading.Event()

    def live_process():
        # Holds the flush's second table, then asks for its first: the flush, waiting longer, is the victim.
        with psycopg.connect(**params, autocommit=False) as other:
            other.execute(f'LOCK TABLE "{second}" IN ROW SHARE MODE')
            holding.set()
            other.execute("SELECT pg_sleep(0.3)")
            other.execute(f'LOCK TABLE "{first}" IN ROW SHARE MODE')
            other.commit()

    thread = threading.Thread(target=live_process)
    thread.start()
    assert holding.wait(10)
    connection.ops.execute_sql_flush(connection.ops.sql_flush(no_style(), [first, second]))
    thread.join(10)
    assert not thread.is_alive() and not Chat.objects.exists()
