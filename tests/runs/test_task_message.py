"""The generation message dispatch writes itself is the one Celery's send_task writes
(real Redis: both land in a scratch queue and are read back), and a worker's Celery
takes it as its own."""
import json

import pytest
from kombu.transport.virtual import Message

from chatsite.celery import app
from chatsite.redis_client import get_redis
from chatsite.runs import task_message
from chatsite.runs.queues import GENERATE_TASK

QUEUE = "test.task-message"
# Fresh per message: the task id (id, root_id, correlation_id), the delivery tag, the reply address.
PER_MESSAGE = {("headers", "id"), ("headers", "root_id"), ("headers", "origin"), ("properties", "correlation_id"),
               ("properties", "delivery_tag"), ("properties", "reply_to")}


@pytest.fixture
def scratch_queue():
    get_redis().delete(QUEUE)
    yield QUEUE
    get_redis().delete(QUEUE)


def flat(envelope: dict) -> dict:
    out = {}
    for section, value in envelope.items():
        if isinstance(value, dict):
            out.update({(section, k): v for k, v in value.items()})
        else:
            out[(section,)] = value
    return out


@pytest.mark.parametrize("kwargs", [{}, {"tier": "interactive"}])
def test_the_hand_built_message_is_field_for_field_celerys(scratch_queue, kwargs):
    app.send_task(GENERATE_TASK, args=[42], kwargs=kwargs, queue=scratch_queue, ignore_result=True,
                  result_cls=task_message._Sent, add_to_parent=False)
    key, payload = task_message.generate_message(scratch_queue, 42, kwargs)
    assert key == scratch_queue
    theirs, ours = flat(json.loads(get_redis().rpop(scratch_queue))), flat(json.loads(payload))
    assert theirs.keys() == ours.keys()
    differing = {k for k in theirs if theirs[k] != ours[k]}
    assert differing <= PER_MESSAGE, {k: (theirs[k], ours[k]) for k in differing - PER_MESSAGE}
    headers = json.loads(payload)["headers"]
    assert headers["id"] == headers["root_id"] == json.loads(payload)["properties"]["correlation_id"]
    assert headers["origin"].startswith("gen")


def test_a_worker_reads_the_task_its_args_and_kwargs_from_it(scratch_queue):
    _, payload = task_message.generate_message(scratch_queue, 7, {"tier": "batch"})
    with app.connection_for_read() as conn:  # the broker channel a worker consumes through
        message = Message(json.loads(payload), channel=conn.default_channel)  # as kombu's Redis consumer builds it
        assert message.headers["task"] == GENERATE_TASK
        args, kwargs, embed = message.decode()
    assert (args, kwargs) == ([7], {"tier": "batch"})
    assert embed == {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def test_send_generate_pushes_one_message_onto_the_queue(scratch_queue):
    task_message.send_generate(scratch_queue, 9, {})
    (raw,) = get_redis().lrange(scratch_queue, 0, -1)
    assert json.loads(raw)["properties"]["delivery_info"]["routing_key"] == scratch_queue


@pytest.fixture
def broker_url(settings):
    """Point CELERY_BROKER_URL elsewhere for one test (task_message caches its reading per process)."""
    def point(url):
        settings.CELERY_BROKER_URL = url
        task_message.direct.cache_clear()
        task_message.same_redis.cache_clear()
    yield point
    task_message.direct.cache_clear()
    task_message.same_redis.cache_clear()
    task_message._broker = None


def test_a_redis_broker_of_its_own_gets_the_message_and_the_fair_queue_script_does_not(broker_url, settings,
                                                                                        scratch_queue):
    base, db = settings.REDIS_URL.rsplit("/", 1)
    other = f"{base}/{(int(db) + 1) % 16}"  # another database of the same server: a different broker URL
    broker_url(other)
    assert task_message.direct() and not task_message.same_redis()
    import redis

    theirs = redis.Redis.from_url(other)
    theirs.delete(scratch_queue)
    try:
        task_message.send_generate(scratch_queue, 11, {})
        assert get_redis().llen(scratch_queue) == 0
        (raw,) = theirs.lrange(scratch_queue, 0, -1)
        assert json.loads(raw)["headers"]["argsrepr"] == "[11]"
    finally:
        theirs.delete(scratch_queue)


def test_a_broker_that_is_not_redis_gets_celerys_send_task(broker_url, monkeypatch):
    broker_url("amqp://guest@127.0.0.1:5672//")
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, **kw: sent.append((name, kw["args"], kw["kwargs"],
                                                                          kw["queue"])))
    task_message.send_generate("pool.x.interactive", 5, {"tier": "interactive"})
    assert sent == [(GENERATE_TASK, [5], {"tier": "interactive"}, "pool.x.interactive")]
