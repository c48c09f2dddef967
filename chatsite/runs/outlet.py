"""The one way out: every stream a client reads goes through here.

Whatever formats it (GET /api/runs/{id}/events, a streamed POST, /v1 chat and text
completions, /v1 responses, the web page's own events), a stream is opened with a
Grant (who reads, through which credential, since when: chatsite.tenancy.revocation)
and then, the same for every surface:
- it holds one slot of its user's open streams: at most SSE_MAX_STREAMS_PER_USER,
  one more is refused (TooManyStreams, 429 with Retry-After);
- it ends within SSE_REVOCATION_CHECK_SECONDS of its access ending (a key revoked, a
  sign-out or password change, a membership, user, tenant or chat gone), and then
  `revoked` is true, so the surface can say why in its own format;
- it yields None after each quiet SSE_KEEPALIVE_SECONDS: the surface's keep-alive.
Surfaces format what it yields; none follows a stream by itself. A request that waits
for a whole reply (a non-streamed /v1 call) is a stream too: it holds a slot and ends
when its access does.
"""
import json
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing

from chatsite import redis_keys
from chatsite.errors import ServiceError
from chatsite.runs.stream.codec import Entry
from chatsite.runs.stream.follow import follow
from chatsite.runs.stream.follow_all import follow_all
from chatsite.runs.stream.hub import USERS, HubError, get_hub
from chatsite.tenancy.revocation import Grant
from chatsite.tenancy.stream_guard import REVOKED, StreamGuard

log = logging.getLogger(__name__)


class AccessEnded(ServiceError):
    """The grant was revoked (at the stream's very start)."""

    status = 401
    code = "not_authenticated"


class Outlet:
    """One open stream: its slot and its revocation watch. Close it (or use `opened`)."""

    def __init__(self, guard: StreamGuard):
        self.guard = guard

    @property
    def revoked(self) -> bool:
        """Whether the stream ended because its access did."""
        return self.guard.revoked

    @classmethod
    async def open(cls, grant: Grant) -> "Outlet":
        """Take a slot for a stream under `grant`. Raises TooManyStreams (429) when the
        user holds SSE_MAX_STREAMS_PER_USER streams, AccessEnded (401) when the grant was
        revoked."""
        guard = await StreamGuard.admit(grant)
        if guard is None:
            raise AccessEnded("your access has ended (a key revoked, a sign-out or a password change); "
                              "sign in again or use a live key")
        return cls(guard)

    @classmethod
    def open_sync(cls, grant: Grant) -> "Outlet":
        """open(), from a request's thread, before the request admits its run: a stream
        refused its slot then admits nothing. Give it back with `close_sync` if the request
        fails before it streams."""
        guard = StreamGuard.admit_sync(grant)
        if guard is None:
            raise AccessEnded("your access has ended (a key revoked, a sign-out or a password change); "
                              "sign in again or use a live key")
        return cls(guard)

    @classmethod
    def watch(cls, grant: Grant) -> "Outlet":
        """For a request that waits for a whole reply: no slot, the same revocation watch."""
        return cls(StreamGuard.watching(grant))

    def regrant(self, grant: Grant) -> None:
        """The grant once its run exists (a stream opened before its run was admitted)."""
        self.guard.regrant(grant)

    def close_sync(self) -> None:
        """close(), from a request's thread."""
        self.guard.close_sync()

    def run(self, run_id: int, *, after: str | None = None, fresh: bool = False) -> AsyncIterator[list[Entry] | None]:
        """A run's entries after `after` (chatsite.runs.stream.follow's rules), None when a
        keep-alive is due; ends at the terminal entry or when the access ends."""
        return follow(run_id, after=after, fresh=fresh, wait=self.guard.next)

    def runs(self, run_ids: list[int], *, fresh: bool = False) -> AsyncIterator[tuple[int, list[Entry]] | None]:
        """Several runs (a call's n choices) as one stream: (index, batch), None for a keep-alive."""
        return follow_all(run_ids, fresh=fresh, wait=self.guard.next)

    async def user_events(self, user_id: int, last_id: str, timeout: float) -> AsyncIterator[list[tuple]]:
        """Lists of (id, event dict) of the user's own events (chatsite.chats.live) after
        `last_id`, as they come; [] after each quiet `timeout`. Ends when Redis goes away
        (the client reconnects with the last id it saw) or the access ends."""
        hub = get_hub(USERS)
        sub = await hub.subscribe(redis_keys.user_events(user_id), last_id)
        try:
            while True:
                try:
                    batch = await self.guard.next(sub, timeout)
                except HubError as exc:
                    log.warning("user %s: events stream ended: %s", user_id, exc)
                    return
                if batch is REVOKED:
                    return
                yield [(entry_id, json.loads(fields["e"])) for entry_id, fields in batch or () if "e" in fields]
        finally:
            hub.unsubscribe(sub)

    def close(self) -> None:
        """Give the slot back (idempotent; queued, not waited for: StreamGuard.close)."""
        self.guard.close()


async def closing_after(outlet: Outlet, body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """`body`, then the outlet's slot given back, however the body ends (a hang-up included).
    The response ends without waiting for Redis: its last frame and its end leave together."""
    try:
        async with aclosing(body) as chunks:
            async for chunk in chunks:
                yield chunk
    finally:
        outlet.close()
