"""The request threads' side of chatsite.edge.handler: one-thread executors whose every
call (a hop) waits for a place in the web's Gate, and gives its pooled database
connections back when it ends.

At most WEB_THREADS of those threads run a hop at once (chatsite/edge/gate.py); the
others wait, first come first served, asleep. No database transaction spans two hops,
and a hop gives its pooled connection back when it ends, so a thread waiting to start a
hop holds nothing a running one could wait for.
"""
from concurrent.futures import ThreadPoolExecutor

from django.db import connections

from chatsite.edge.gate import Gate


class _GatedExecutor(ThreadPoolExecutor):
    """A one-thread executor whose every call runs in a place of `gate`."""

    def __init__(self, gate: Gate):
        super().__init__(max_workers=1, thread_name_prefix="request")
        self._gate = gate

    def submit(self, fn, /, *args, **kwargs):
        return super().submit(self._gate.run, _hop, fn, *args, **kwargs)


def _hop(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    finally:
        _give_back_pooled_connections()


class RunningGate:
    """At most `limit` request threads running a hop at once (0: no bound, Django's way):
    `executor()` makes the one-thread executors whose calls wait for a place."""

    def __init__(self, limit: int):
        self._gate = Gate(limit) if limit > 0 else None

    def executor(self) -> ThreadPoolExecutor:
        """A one-thread executor for one request at a time, its calls in the gate."""
        if self._gate is None:
            return ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")
        return _GatedExecutor(self._gate)


def _give_back_pooled_connections() -> None:
    """Return this thread's pooled database connections to their pool at the end of a
    hop (no transaction spans two hops). A thread waiting for its turn then holds no
    connection, so a hop in its turn never waits, turn held, for a connection that only
    a thread without a turn could give back (an async view's request kept its connection
    from its first hop to its response's close: 64 /v1 streams held the web's whole pool, 24)."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and not conn.in_atomic_block and conn.settings_dict["OPTIONS"].get("pool"):
            conn.close()
