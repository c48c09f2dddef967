"""A stream gives its slot back when it ends, even when its task is cancelled right after
(a client hangs up as soon as the last frame arrives), without waiting for Redis (its
response's end leaves with its last frame) and without costing the web process a Redis
connection per stream: the ZREM goes to the loop's releaser, which the cancel does not
interrupt (redis-py closes a connection whose command was cancelled mid-reply, and the
next command then opened a new one: one connect and handshake per stream). The releaser
holds one connection of its own, taken once per loop."""
import asyncio
import time

import pytest
from redis.asyncio.connection import AbstractConnection

from chatsite import redis_keys
from chatsite.redis_client import get_async_redis, get_redis
from chatsite.tenancy.revocation import Grant
from chatsite.tenancy.stream_guard import StreamGuard


@pytest.mark.django_db(transaction=True)  # a first admission may rebuild the revocation markers
def test_a_cancelled_close_still_frees_the_slot_and_keeps_the_connection(monkeypatch):
    # ids no test object has (an earlier test's revocation of user 4 would refuse the slots)
    base = 10**12 + int(time.time() * 1000) % 10**9
    grant = Grant(run_id=base, chat_id=base, tenant_id=base, user_id=base, credential="", since=time.time())
    slots = redis_keys.sse_streams(grant.tenant_id, grant.user_id)
    # connections this process opens (Redis's own counter also counts the other test workers')
    opened = []
    connect = AbstractConnection.connect_check_health

    async def counting_connect(self, *args, **kwargs):
        if not self.is_connected:
            opened.append(self)
        return await connect(self, *args, **kwargs)

    monkeypatch.setattr(AbstractConnection, "connect_check_health", counting_connect)

    async def run():
        client = get_async_redis()
        (await StreamGuard.admit(grant)).close()
        await asyncio.sleep(0.05)  # the releaser's own connection, once per loop
        guards = [await StreamGuard.admit(grant) for _ in range(3)]
        assert get_redis().zcard(slots) == 3
        connections_before = len(opened)

        async def stream(guard):  # a stream's task: its slot given back, then cancelled at once
            try:
                await asyncio.sleep(3600)
            finally:
                guard.close()  # returns at once: nothing of the stream's waits for Redis

        for guard in guards:
            streaming = asyncio.ensure_future(stream(guard))
            await asyncio.sleep(0)
            streaming.cancel()
            await asyncio.sleep(0)  # the ZREM is on its way as the stream's task ends
            assert streaming.cancelled()
            await asyncio.sleep(0.05)  # the ZREM ends on its own
        await client.ping()
        await client.aclose()
        return connections_before

    connections_before = asyncio.run(run())
    assert get_redis().zcard(slots) == 0  # every slot given back
    assert connections_before >= 1  # the count sees this loop's connections
    # the three ZREMs and the PING ran on connections already open: none was dropped
    assert len(opened) == connections_before


def test_a_stream_cancelled_while_it_is_admitted_gives_the_slot_back(monkeypatch):
    """A client that hangs up while its stream's admission waits for Redis: the slot the
    admission took there is given back once the reply comes, not held until it expires."""
    base = 3 * 10**12 + int(time.time() * 1000) % 10**9  # ids no test object has (as above)
    grant = Grant(run_id=base, chat_id=base, tenant_id=base, user_id=base, credential="", since=time.time())
    slots = redis_keys.sse_streams(grant.tenant_id, grant.user_id)
    call = StreamGuard._call

    async def slow_reply(self, cap):  # Redis took the slot; its reply is late
        result = await call(self, cap)
        await asyncio.sleep(0.2)
        return result

    monkeypatch.setattr(StreamGuard, "_call", slow_reply)

    async def run():
        admitting = asyncio.ensure_future(StreamGuard.admit(grant))
        await asyncio.sleep(0.1)
        assert get_redis().zcard(slots) == 1  # taken, and the stream does not know it yet
        admitting.cancel()
        await asyncio.gather(admitting, return_exceptions=True)
        assert admitting.cancelled()
        await asyncio.sleep(0.3)  # the reply came: the slot went back
        await get_async_redis().aclose()

    asyncio.run(run())
    assert get_redis().zcard(slots) == 0


def test_an_sse_response_closes_its_body_when_the_client_hangs_up_during_a_send():
    """Django closes what the response's __aiter__ gives; for an SseResponse that is the body
    itself, so the body's `finally` (a slot given back, a hub subscription ended) runs then."""
    from django.core.handlers.asgi import ASGIHandler

    from chatsite.edge.sse import SseResponse

    closed = []

    async def body():
        try:
            while True:
                yield b"data: x\n\n"
        finally:
            closed.append(True)

    async def send(message):
        if message["type"] == "http.response.body" and message.get("body"):
            raise asyncio.CancelledError  # the client hung up during this send

    async def run():
        try:
            await ASGIHandler.send_response(ASGIHandler.__new__(ASGIHandler), SseResponse(body()), send)
        except asyncio.CancelledError:
            pass
        return list(closed)

    assert asyncio.run(run()) == [True]  # closed before send_response returned, not by the collector


@pytest.mark.django_db(transaction=True)  # the first admission may rebuild the revocation markers
def test_a_releaser_whose_write_is_stuck_is_replaced_by_the_next_release(monkeypatch):
    """Redis stops taking the releaser's writes (its connection's buffer full): the next
    stream's slot is not stuck behind them; the release that finds the batch older than
    CLOSE_TIMEOUT_SECONDS starts afresh, and the stuck batch's slot expires on its own."""
    from chatsite.tenancy import stream_guard
    monkeypatch.setattr(stream_guard, "CLOSE_TIMEOUT_SECONDS", 0.2)
    # ids no test object has (another test's revocation of a user, a tenant or a chat would refuse the slots)
    base = 2 * 10**12 + int(time.time() * 1000) % 10**9
    grant = Grant(run_id=base, chat_id=base, tenant_id=base, user_id=base, credential="", since=time.time())
    slots = redis_keys.sse_streams(grant.tenant_id, grant.user_id)
    stuck = {"next": False, "writes": 0}
    send = AbstractConnection.send_packed_command

    async def maybe_stuck(self, *args, **kwargs):
        if stuck["next"]:  # this write never completes
            stuck["next"], stuck["writes"] = False, stuck["writes"] + 1
            await asyncio.sleep(3600)
        return await send(self, *args, **kwargs)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", maybe_stuck)

    async def run():
        warm = await StreamGuard.admit(grant)
        warm.close()
        await asyncio.sleep(0.05)  # the releaser's connection is open (and told to send no replies)
        first, second = await StreamGuard.admit(grant), await StreamGuard.admit(grant)
        first_slot = first._slot_id
        stuck["next"] = True
        first.close()
        await asyncio.sleep(0.3)
        assert stuck["writes"] == 1 and get_redis().zcard(slots) == 2  # its ZREM never left
        second.close()  # the releaser is stuck: this release starts another
        await asyncio.sleep(0.2)
        assert get_redis().zrange(slots, 0, -1) == [first_slot]  # held until it expires (SLOT_TTL)
        await get_async_redis().aclose()

    try:
        asyncio.run(run())
    finally:
        get_redis().delete(slots)


@pytest.mark.django_db(transaction=True)  # the first admission may rebuild the revocation markers
def test_a_redis_that_refuses_reply_off_gets_its_answers_read(monkeypatch, caplog):
    """A Redis whose ACL refuses CLIENT REPLY OFF: the releaser says so, reads each answer
    (none is left unread on its connection), and gives every slot back all the same."""
    from chatsite.tenancy import stream_guard
    monkeypatch.setattr(stream_guard, "_REPLY_OFF", b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$4\r\nNOPE\r\n")
    base = 4 * 10**12 + int(time.time() * 1000) % 10**9  # ids no test object has (as above)
    grant = Grant(run_id=base, chat_id=base, tenant_id=base, user_id=base, credential="", since=time.time())
    slots = redis_keys.sse_streams(grant.tenant_id, grant.user_id)
    answers = []
    read = AbstractConnection.read_response

    async def reading(self, *args, **kwargs):
        answers.append(await read(self, *args, **kwargs))
        return answers[-1]

    monkeypatch.setattr(AbstractConnection, "read_response", reading)

    async def run():
        for _ in range(3):
            guards = [await StreamGuard.admit(grant) for _ in range(2)]
            assert get_redis().zcard(slots) == 2
            for guard in guards:
                guard.close()
            await asyncio.sleep(0.05)
            assert get_redis().zcard(slots) == 0
        releaser = stream_guard._releaser()
        await asyncio.sleep(0.05)
        assert not releaser._task.done()  # no unexpected answer broke it
        await get_async_redis().aclose()

    answers.clear()
    asyncio.run(run())
    assert "refused CLIENT REPLY OFF" in caplog.text
    assert answers.count(1) == 6  # each ZREM's answer read (the admissions' answers are lists)
