"""Turns (chatsite/turns.py): at most N request threads run Python at once, first come
first served; a thread waiting for Postgres gives its turn up meanwhile and, the wait
over, goes ahead of threads that have not started; Hops bounds the threads inside a hop."""
import threading
import time

import pytest
from django.db import connection

from chatsite.turns import Hops, Turns, TurnYieldingConnection


def _in_threads(targets, gap: float = 0.02) -> None:
    threads = []
    for target in targets:
        threads.append(threading.Thread(target=target))
        threads[-1].start()
        time.sleep(gap)  # they arrive in this order
    for t in threads:
        t.join(10)


def test_at_most_the_limit_run_at_once_in_the_order_they_came():
    turns, lock, running, most, order = Turns(2), threading.Lock(), [0], [0], []

    def hop(i):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            order.append(i)
        time.sleep(0.1)
        with lock:
            running[0] -= 1

    _in_threads([lambda i=i: turns.run(hop, i) for i in range(6)])
    assert most[0] == 2 and order == list(range(6))


def test_a_thread_back_from_a_wait_goes_before_threads_that_have_not_started():
    turns, order = Turns(1), []

    def first():  # gives its turn up for a wait, as a query does, then finishes
        def hop():
            turns.give()
            time.sleep(0.2)  # meanwhile "second" runs; "third" and "fourth" queue before it is back
            turns.take(back=True)
            order.append("first, back")
        turns.run(hop)

    def slow(name):
        def hop():
            order.append(name)
            time.sleep(0.3)
        return lambda: turns.run(hop)

    _in_threads([first, slow("second"), slow("third"), slow("fourth")], gap=0.05)
    assert order == ["second", "first, back", "third", "fourth"]


@pytest.mark.django_db
def test_a_thread_waiting_for_postgres_gives_its_turn_to_another():
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("prepare_threshold", None)
    turns, seen = Turns(1), []

    def query():
        with TurnYieldingConnection.connect(**params) as conn:
            conn.execute("SELECT pg_sleep(0.4)")
        seen.append(("query done", time.monotonic()))

    def python():
        seen.append(("python ran", time.monotonic()))

    _in_threads([lambda: turns.run(query), lambda: turns.run(python)], gap=0.1)
    assert [what for what, _ in seen] == ["python ran", "query done"]  # it did not wait for the query


def test_hops_bound_the_threads_inside_a_hop_waiting_or_not():
    hops, lock, inside, most = Hops(started=3, running=1), threading.Lock(), [0], [0]

    def hop():
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        hops.turns.give()  # a wait, as for Postgres: another may run meanwhile
        time.sleep(0.1)
        hops.turns.take(back=True)
        with lock:
            inside[0] -= 1

    _in_threads([lambda: hops.run(hop) for _ in range(6)], gap=0.005)
    assert most[0] == 3


def test_a_wait_inside_a_wait_gives_the_turn_up_once():
    """A pool's checkout check queries Postgres inside getconn, both waits: the turn is
    given up once and taken back once (given twice, a third thread would run)."""
    from chatsite.turns import outside_turn

    turns, lock, running, most = Turns(1), threading.Lock(), [0], [0]

    def count(hold: float):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(hold)
        with lock:
            running[0] -= 1

    def nested():
        outside_turn(outside_turn, time.sleep, 0.05)
        count(0.2)

    _in_threads([lambda: turns.run(nested), lambda: turns.run(count, 0.2), lambda: turns.run(count, 0.2)])
    assert most[0] == 1
