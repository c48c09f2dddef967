"""The broker transport (workers/broker.py): kombu's Redis transport with one client per
connection pool instead of one per operation, and messages delivered and acknowledged
as before."""
import threading

import pytest
from django.conf import settings
from kombu import Connection, Exchange, Queue

from workers import broker
from workers.app import app


def test_the_worker_app_uses_it_for_a_redis_broker_and_leaves_others_alone():
    assert app.conf.broker_transport == "workers.broker:Transport"
    with app.connection_for_write() as conn:
        assert conn.transport_cls == "workers.broker:Transport" and isinstance(conn.transport, broker.Transport)
    assert broker.transport_for("sentinel://127.0.0.1:26379") is None
    assert broker.transport_for("rediss://host:6380/0") == "workers.broker:Transport"


@pytest.fixture
def channel():
    with Connection(settings.CELERY_BROKER_URL, transport=broker.Transport) as conn:
        channel = conn.channel()
        yield channel
        channel.close()


def test_operations_share_one_client_until_the_pool_is_replaced(channel):
    with channel.conn_or_acquire() as a, channel.conn_or_acquire() as b:
        assert a is b and a.connection_pool is channel.pool
    given = object()
    with channel.conn_or_acquire(given) as c:
        assert c is given  # a caller's own client is used as it is
    channel._disconnect_pools()  # what a fork or a reconnection does
    with channel.conn_or_acquire() as d:
        assert d is not a and d.connection_pool is channel.pool


def test_a_message_is_delivered_and_acknowledged_from_many_threads(channel):
    queue = Queue("test-broker-shared-client", Exchange("test-broker-shared-client"), "k", channel=channel)
    queue.declare()
    queue.purge()
    producer_conn = channel.connection.client
    with producer_conn.Producer(channel=channel) as producer:
        for i in range(40):
            producer.publish({"i": i}, exchange=queue.exchange, routing_key="k", declare=[queue])
    messages = [queue.get(no_ack=False) for _ in range(40)]
    assert sorted(m.payload["i"] for m in messages) == list(range(40))
    assert channel.client.hlen(channel.unacked_key) >= 40  # each delivery recorded as unacknowledged
    threads = [threading.Thread(target=lambda ms: [m.ack() for m in ms], args=(messages[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    unacked = {tag.decode() if isinstance(tag, bytes) else tag for tag in channel.client.hkeys(channel.unacked_key)}
    assert unacked.isdisjoint(m.delivery_tag for m in messages)  # every acknowledgement reached Redis
    assert queue.get() is None
    queue.delete()


def test_task_threads_share_the_app_s_one_disabled_result_backend():
    """A task's trace reads `task.backend`: per thread, Celery would build a backend (an entry
    points scan, ~20 ms of CPU) in every task thread's first task."""
    first = app.backend  # as the worker's start does (its banner shows `results: disabled://`)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(app.backend)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 3 and all(b is first for b in seen)
    assert type(app.backend).__name__ == "DisabledBackend"
