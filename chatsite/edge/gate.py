"""At most N of a web process's request threads run a hop at once, first come, first served.

A web process has one GIL, shared by its event loop (which streams every run's events)
and by the threads that run requests' sync code. With every thread of a burst running
at once, 64 POSTs shared the GIL with each other and with the loop: each of them ended
late, all together, and the loop stalled for hundreds of milliseconds between two SSE
frames. Here a thread runs its hop only while it holds a place, and waits for one asleep,
in the order it asked; a hop gives its pooled database connection back when it ends
(chatsite.edge.request_threads), so a thread that waits holds nothing a running one needs.
"""
import threading
from collections import deque


class Gate:
    """`limit` places, handed over in the order they were asked for."""

    def __init__(self, limit: int):
        self._lock = threading.Lock()
        self._free = limit
        self._waiting: deque[threading.Lock] = deque()

    def run(self, fn, *args, **kwargs):
        """fn(*args, **kwargs) in a place (waiting for one first)."""
        self._take()
        try:
            return fn(*args, **kwargs)
        finally:
            self._give()

    def _take(self) -> None:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            waiter = threading.Lock()
            waiter.acquire()
            self._waiting.append(waiter)
        waiter.acquire()  # released by _give, which hands this thread the place

    def _give(self) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().release()
            else:
                self._free += 1
