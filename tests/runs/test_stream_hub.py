"""The per-process stream hub: every subscriber gets every entry after its id, once."""
import asyncio

import pytest

from chatsite.redis_client import get_redis
from chatsite.runs.stream.hub import StreamHub


async def drain(sub, want: int, timeout: float = 5.0) -> list[str]:
    got: list[str] = []
    while len(got) < want:
        batch = await sub.next(timeout)
        assert batch is not None, f"only {len(got)} of {want} entries arrived"
        got += [fields["i"] for _, fields in batch]
    return got


def test_late_joiners_behind_the_hub_get_everything_and_nothing_twice():
    r = get_redis()
    key = "test:hub:stream"
    r.delete(key)

    async def scenario():
        hub = StreamHub()
        live = await hub.subscribe(key, "0-0")
        for i in range(5):
            r.xadd(key, {"i": str(i)})
        first = await drain(live, 5)
        await asyncio.sleep(0.05)  # the hub is now blocked reading after entry 4
        ids = [eid for eid, _ in r.xrange(key)]
        # entry 5 lands while the hub is blocked (its reply is in flight) and, before the
        # hub handles that reply, two subscribers join behind the hub's position
        r.xadd(key, {"i": "5"})
        late = await hub.subscribe(key, "0-0")
        middle = await hub.subscribe(key, ids[2])
        for i in range(6, 8):
            r.xadd(key, {"i": str(i)})
        return first, await drain(live, 3), await drain(late, 8), await drain(middle, 5)

    first, live_rest, late, middle = asyncio.run(scenario())
    assert first + live_rest == [str(i) for i in range(8)]
    assert late == [str(i) for i in range(8)]
    assert middle == [str(i) for i in range(3, 8)]
    r.delete(key)


@pytest.mark.parametrize("joiners", [1, 20])
def test_many_streams_share_one_reader(joiners):
    r = get_redis()
    keys = [f"test:hub:many:{i}" for i in range(joiners)]
    r.delete(*keys)

    async def scenario():
        hub = StreamHub()
        subs = [await hub.subscribe(k, "0-0") for k in keys]
        for k in keys:
            r.xadd(k, {"i": k})
        return [await drain(s, 1) for s in subs]

    assert asyncio.run(scenario()) == [[k] for k in keys]
    r.delete(*keys)


def _xread_starts(hub: StreamHub) -> dict[str, str]:
    """The streams and ids of the hub's next XREAD, parsed back from its wire format."""
    raw = hub._packed_xread().split(b"\r\n")
    args = [a.decode() for a in raw[2::2][:int(raw[0][1:])]]
    assert args[:6] == ["XREAD", "COUNT", "1000", "BLOCK", "5000", "STREAMS"], args
    names = args[6:]
    keys, ids = names[:len(names) // 2], names[len(names) // 2:]
    return dict(zip(keys, ids))


def test_each_read_starts_every_stream_at_its_furthest_behind_subscriber():
    """The hub keeps each stream's next read position as reads and (un)subscribes move
    it (not recomputed over every stream per read): the lowest last id of its subscribers."""
    r = get_redis()
    a, b = "test:hub:start:a", "test:hub:start:b"
    r.delete(a, b)

    async def scenario():
        hub = StreamHub()
        seen = []
        live = await hub.subscribe(a, "0-0")
        quiet = await hub.subscribe(b, "5-0")
        ids = [r.xadd(a, {"i": str(i)}) for i in range(3)]
        await drain(live, 3)
        await asyncio.sleep(0.05)  # the hub is blocked on its next read
        seen.append(_xread_starts(hub))
        behind = await hub.subscribe(a, ids[0])  # joins behind: the next read of a starts there
        seen.append(_xread_starts(hub))
        hub.unsubscribe(behind)  # the one behind leaves: back to the live edge
        seen.append(_xread_starts(hub))
        hub.unsubscribe(quiet)
        seen.append(_xread_starts(hub))
        hub.unsubscribe(live)
        return ids, hub._wake_key, seen

    ids, wake, seen = asyncio.run(scenario())
    assert seen[0] == {a: ids[2], b: "5-0", wake: seen[0][wake]}
    assert seen[1][a] == ids[0] and seen[1][b] == "5-0"
    assert seen[2][a] == ids[2]
    assert seen[3] == {a: ids[2], wake: seen[3][wake]}
    r.delete(a, b)
