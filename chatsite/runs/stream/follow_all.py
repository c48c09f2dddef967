"""Several runs' streams followed as one: the n choices of a completion, interleaved.

Each run is read by the one follower (follow.follow) with all its rules; this only
merges what they yield, in the order it comes, tagged with the run's index."""
import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing

from chatsite.runs.stream.codec import Entry
from chatsite.runs.stream.follow import follow


async def follow_all(run_ids: list[int], *, fresh: bool = False, keepalive: float | None = None,
                     wait=None) -> AsyncIterator[tuple[int, list[Entry]] | None]:
    """(index, batch) for every batch follow() yields for run_ids[index], as they come,
    until each stream has ended (its terminal entry last, as follow() ends). Yields None
    once all the streams still open have been quiet for a `keepalive` interval (a
    keep-alive is due). Closing this (or cancelling its reader) closes every follower.
    `wait`: as follow() takes it, for every stream. Raises what follow() raises (HubError
    when Redis goes away)."""
    if len(run_ids) == 1:  # the common case: no tasks in between
        async with aclosing(follow(run_ids[0], fresh=fresh, keepalive=keepalive, wait=wait)) as batches:
            async for batch in batches:
                yield None if batch is None else (0, batch)
        return
    followers = [follow(run_id, fresh=fresh, keepalive=keepalive, wait=wait) for run_id in run_ids]
    pending = {asyncio.ensure_future(anext(f)): i for i, f in enumerate(followers)}
    quiet: set[int] = set()
    try:
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=pending.get):
                i = pending.pop(task)
                try:
                    batch = task.result()
                except StopAsyncIteration:
                    quiet.discard(i)
                    continue
                pending[asyncio.ensure_future(anext(followers[i]))] = i
                if batch is not None:
                    quiet.clear()
                    yield i, batch
                    continue
                quiet.add(i)
                if quiet >= set(pending.values()):
                    quiet.clear()
                    yield None
    finally:
        # 1) stop the reads in flight  2) let them unwind  3) close every follower (unsubscribes)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for f in followers:
            await f.aclose()
