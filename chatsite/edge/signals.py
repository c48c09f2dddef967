"""request_started and request_finished for an async view's request, without a thread hop
when their receivers reach nothing from the event loop.

Django's `Signal.asend` runs a signal's sync receivers in a thread (sync_to_async), and
its ASGI handler closes a streamed response (request_finished) in one too: two thread
hops of every /v1 request, ~170 us of CPU each here (chatsite.edge.handler), for
receivers that do nothing then. Django's own receivers of these two signals are these:
- reset_queries and close_old_connections go through the request's database
  connections, and do nothing to one that is not open. Every hop gives its pooled
  connection back as it ends (chatsite.edge.request_threads), so between hops none is open.
- close_caches closes each cache in use; the base class's close does nothing, and of
  Django's backends only memcached's closes something (a connection).
- reset_urlconf sets a context variable.
So when every live receiver is one of those (no other app connected one), none of them
async, no cache backend closes something, and no database connection is open, the
receivers run here, on the event loop; otherwise as Django runs them.
"""
from django.conf import settings
from django.core.cache import close_caches
from django.core.cache.backends.base import BaseCache
from django.core.handlers.base import reset_urlconf
from django.db import close_old_connections, connections, reset_queries
from django.utils.module_loading import import_string

_DATABASE = frozenset({reset_queries, close_old_connections})


def _caches_close_nothing() -> bool:
    return all(import_string(conf["BACKEND"]).close is BaseCache.close for conf in settings.CACHES.values())


def inline_receivers() -> frozenset:
    """The receivers that may run on the event loop (close_caches only when no configured
    cache backend's close does anything)."""
    return _DATABASE | {reset_urlconf} | ({close_caches} if _caches_close_nothing() else set())


_inline = None


def signal_inline(signal, sender) -> bool:
    """Whether `signal`'s receivers for `sender` may run on the event loop now."""
    global _inline
    if _inline is None:
        _inline = inline_receivers()
    sync, asynchronous = signal._live_receivers(sender)
    if asynchronous or not _inline.issuperset(sync):
        return False
    return not any(conn.connection is not None for conn in connections.all(initialized_only=True))


async def send_signal(signal, *, sender, **named) -> None:
    """signal.asend(sender, **named): on the event loop when signal_inline says it may be."""
    if signal_inline(signal, sender):
        signal.send(sender=sender, **named)
    else:
        await signal.asend(sender=sender, **named)
