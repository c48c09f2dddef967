"""A stream gives its slot back when it ends, even when its task is cancelled while it
does (a client hangs up as soon as the last frame arrives), and without costing the web
process its Redis connection: the ZREM runs in a task of its own, which the cancel does
not interrupt (redis-py closes a connection whose command was cancelled mid-reply, and
the next command then opened a new one: one connect and handshake per stream)."""
import asyncio
import time

from chatsite import redis_keys
from chatsite.redis_client import get_async_redis, get_redis
from chatsite.tenancy.revocation import Grant
from chatsite.tenancy.stream_guard import StreamGuard


def test_a_cancelled_close_still_frees_the_slot_and_keeps_the_connection():
    grant = Grant(run_id=1, chat_id=2, tenant_id=3, user_id=4, credential="", since=time.time())
    slots = redis_keys.sse_streams(grant.tenant_id, grant.user_id)

    async def run():
        client = get_async_redis()
        guards = [await StreamGuard.admit(grant) for _ in range(3)]
        assert get_redis().zcard(slots) == 3
        connections_before = get_redis().info("stats")["total_connections_received"]
        for guard in guards:
            closing = asyncio.ensure_future(guard.close())
            await asyncio.sleep(0)  # the ZREM is on its way
            closing.cancel()
            await asyncio.gather(closing, return_exceptions=True)
            assert closing.cancelled()  # the cancel still reaches the stream's task
            await asyncio.sleep(0.05)  # the ZREM ends on its own (one at a time: one connection)
        await client.ping()
        await client.aclose()
        return connections_before

    connections_before = asyncio.run(run())
    assert get_redis().zcard(slots) == 0  # every slot given back
    # the three ZREMs and the PING ran on the connection the admissions opened: none was dropped
    assert get_redis().info("stats")["total_connections_received"] == connections_before
