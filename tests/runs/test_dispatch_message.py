"""The generation message dispatch pushes is one a worker's Celery takes as its own:
real Redis, read back through kombu's Redis channel as a worker's consumer reads it."""
import pytest

from chatsite.celery import app
from chatsite.redis_client import get_redis
from chatsite.runs.dispatch import message
from chatsite.runs.queues import GENERATE_TASK

QUEUE = "test.dispatch-message"


@pytest.fixture
def scratch_queue():
    get_redis().delete(QUEUE)
    yield QUEUE
    get_redis().delete(QUEUE)


def consumed(queue: str):
    """The next message on `queue`, as kombu's Redis transport hands it to a worker."""
    with app.connection_for_read() as conn:
        channel = conn.default_channel
        raw = channel._get(queue)
        return channel.Message(raw, channel=channel)


@pytest.mark.parametrize("kwargs", [{}, {"tier": "batch"}])
def test_a_worker_reads_the_task_its_args_and_kwargs_from_it(scratch_queue, kwargs):
    message.send_generate(scratch_queue, 7, kwargs)
    got = consumed(scratch_queue)
    assert got.headers["task"] == GENERATE_TASK
    assert got.headers["id"] == got.headers["root_id"] == got.properties["correlation_id"]
    assert got.headers["ignore_result"] is True and got.headers["argsrepr"] == "[7]"
    assert got.delivery_info["routing_key"] == scratch_queue
    args, task_kwargs, embed = got.decode()
    assert (args, task_kwargs) == ([7], kwargs)
    assert embed == {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
    assert get_redis().llen(scratch_queue) == 0  # one message, not two


def test_each_message_has_its_own_task_id_and_delivery_tag(scratch_queue):
    message.send_generate(scratch_queue, 1, {})
    message.send_generate(scratch_queue, 1, {})
    first, second = consumed(scratch_queue), consumed(scratch_queue)
    assert first.headers["id"] != second.headers["id"]
    assert first.delivery_tag != second.delivery_tag


@pytest.fixture
def broker_url(settings):
    """Point CELERY_BROKER_URL elsewhere for one test (message caches its reading per process)."""
    def point(url):
        settings.CELERY_BROKER_URL = url
        message.same_redis.cache_clear()
    yield point
    message.same_redis.cache_clear()


@pytest.mark.parametrize("url", ["amqp://guest@127.0.0.1:5672//", "redis://127.0.0.1:6379/15"])
def test_a_broker_that_is_not_the_platforms_redis_gets_celerys_send_task(broker_url, monkeypatch, url):
    broker_url(url)
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, **kw: sent.append((name, kw["args"], kw["kwargs"],
                                                                          kw["queue"])))
    message.send_generate("pool.x.interactive", 5, {"tier": "interactive"})
    assert sent == [(GENERATE_TASK, [5], {"tier": "interactive"}, "pool.x.interactive")]
