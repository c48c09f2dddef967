"""Turns: at most N of a web process's request threads run Python at once.

A web process has one GIL, shared by its event loop (which streams every run's events)
and by the threads that run requests' sync code. With every thread of a burst running
at once, 64 POSTs shared the GIL with each other and with the loop: each of them ended
late, all together, and the loop stalled for hundreds of milliseconds between two SSE
frames. Here a thread runs only while it holds a turn, and waits for one asleep.

- Turns go first come, first served, handed from the thread that gives one up straight
  to the next in line.
- A thread that waits for Postgres gives its turn up for the wait (`TurnYieldingConnection`,
  and `TurnYieldingPool` for a pooled connection) and, the wait over, takes one again
  ahead of threads that have not started: the CPU stays busy while queries run, the
  requests already under way finish first, and no thread waits for a connection with a
  turn in hand that the connection's holder needs to finish.
"""
import threading
from collections import deque

import psycopg
from psycopg_pool import ConnectionPool

_held = threading.local()  # .turns: the Turns this thread holds one of, while it runs a hop


class Turns:
    """`limit` turns, handed over in order: threads back from a wait first, then the others."""

    def __init__(self, limit: int):
        self._lock = threading.Lock()
        self._free = limit
        self._new: deque[threading.Lock] = deque()  # threads that have not started, in order
        self._back: deque[threading.Lock] = deque()  # threads back from a wait, served first

    def take(self, *, back: bool = False) -> None:
        """Wait for a turn (`back`: this thread gave its turn up for a wait)."""
        with self._lock:
            if self._free and not self._back and (back or not self._new):
                self._free -= 1
                return
            waiter = _waiter()
            (self._back if back else self._new).append(waiter)
        waiter.acquire()  # released by give(), which hands this thread the turn

    def give(self) -> None:
        with self._lock:
            line = self._back or self._new
            if line:
                line.popleft().release()
            else:
                self._free += 1

    def run(self, fn, *args, **kwargs):
        """fn(*args, **kwargs) in a turn; the thread's Postgres waits give it up meanwhile."""
        self.take()
        _held.turns = self
        try:
            return fn(*args, **kwargs)
        finally:
            _held.turns = None
            self.give()


class Hops:
    """At most `started` threads inside a hop (waiting for Postgres or not), first come,
    first served, and at most `running` of them running Python (`Turns`). The first bound
    keeps a burst's requests in order: 64 POSTs that all started at once, giving their
    turns up at every query, shared the CPU and ended late together, as with no bound."""

    def __init__(self, started: int, running: int):
        self._started = threading.BoundedSemaphore(started) if started > 0 else None
        self.turns = Turns(running)

    def run(self, fn, *args, **kwargs):
        if self._started is None:
            return self.turns.run(fn, *args, **kwargs)
        with self._started:
            return self.turns.run(fn, *args, **kwargs)


def _waiter() -> threading.Lock:
    """This thread's lock to sleep on, held (locked) by default, reused across waits."""
    lock = getattr(_held, "waiter", None)
    if lock is None:
        lock = _held.waiter = threading.Lock()
        lock.acquire()
    return lock


def outside_turn(fn, *args, **kwargs):
    """fn(*args, **kwargs), this thread's turn (if it holds one) given up meanwhile."""
    turns = getattr(_held, "turns", None)
    if turns is None:  # no turn held, or given up already (a pool's checkout check, inside getconn)
        return fn(*args, **kwargs)
    _held.turns = None
    turns.give()
    try:
        return fn(*args, **kwargs)
    finally:
        turns.take(back=True)
        _held.turns = turns


class TurnYieldingConnection(psycopg.Connection):
    """A psycopg connection whose waits for the server give up the thread's turn."""

    def wait(self, gen, *args, **kwargs):
        return outside_turn(super().wait, gen, *args, **kwargs)


class TurnYieldingPool(ConnectionPool):
    """A pool whose wait for a free connection gives up the thread's turn."""

    def getconn(self, *args, **kwargs):
        return outside_turn(super().getconn, *args, **kwargs)
