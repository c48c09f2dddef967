"""A generation task's Celery message, built with Celery's and kombu's own API.

dispatch pushes the message onto the broker's Redis list itself, in the same round trip
(and the same script) as the fair queue's record of its run (chatsite.runs.fair_queue),
so a worker is never woken for a run the fair queue does not hold. Celery builds the
message (`app.amqp.as_task_v2`: task protocol 2), kombu serializes its body and wraps it
in its Redis transport's envelope (`prepare_message`, the channel's body encoding and
delivery tag): this module only takes the finished payload instead of letting a
producer send it. Any broker other than the platform's own Redis gets Celery's
`send_task` (send_generate). The sweep asks here how many messages a queue still holds
(messages_waiting: a run whose wake-up was lost has none).
"""
import uuid
from functools import cache

from django.conf import settings
from kombu.exceptions import ChannelError
from kombu.serialization import dumps as serialize
from kombu.utils.json import dumps as to_json

from chatsite.celery import app
from chatsite.runs.queues import GENERATE_TASK


@cache
def same_redis() -> bool:
    """Whether the broker is the platform's own Redis (the default): a message can then
    be pushed by the same script that records its run."""
    url = settings.CELERY_BROKER_URL
    return url.split("://", 1)[0] in ("redis", "rediss", "unix") and url == settings.REDIS_URL


@cache
def _serializer() -> str:
    """Celery's task serializer, read once: each read of app.conf goes through Django's
    settings (a quarter of a message's cost when read per message)."""
    return app.conf.task_serializer


@cache
def _channel():
    """kombu's Redis channel for this process: only its envelope methods are used (no I/O)."""
    return app.connection_for_write().default_channel


def generate_message(queue: str, run_id: int, kwargs: dict) -> tuple[str, str]:
    """The list key and the payload of a `workers.generate_run` message for `run_id` on
    `queue`, byte for byte what Celery's send_task would LPUSH there."""
    task_id = str(uuid.uuid4())
    args = [run_id]
    # argsrepr/kwargsrepr given: Celery's saferepr of them was the costliest step of send_task.
    headers, properties, body, _ = app.amqp.as_task_v2(
        task_id, GENERATE_TASK, args=args, kwargs=kwargs, ignore_result=True,
        argsrepr=repr(args), kwargsrepr=repr(kwargs))
    content_type, content_encoding, payload = serialize(body, serializer=_serializer())
    channel = _channel()
    properties["delivery_mode"] = 2  # kombu's Producer.publish default: persistent
    message = channel.prepare_message(payload, 0, content_type, content_encoding, headers, properties)
    channel._inplace_augment_message(message, "", queue)  # body encoding, delivery tag and info
    return queue, to_json(message)


def send_generate(queue: str, run_id: int, kwargs: dict) -> None:
    """Send one generation task message: an LPUSH onto the platform's Redis, else send_task."""
    if same_redis():
        from chatsite.redis_client import get_redis

        key, payload = generate_message(queue, run_id, kwargs)
        get_redis().lpush(key, payload)
        return
    app.send_task(GENERATE_TASK, args=[run_id], kwargs=kwargs, queue=queue, ignore_result=True,
                  result_cls=_Sent, add_to_parent=False)


class _Sent:
    """What send_task returns for a task whose result nobody reads. Celery's default
    AsyncResult builds the result backend, per thread: under ASGI every request has
    its own thread, and that build scanned the installed packages' entry points."""

    __slots__ = ("id", "ignored")

    def __init__(self, task_id: str):
        self.id = task_id


def messages_waiting(queues) -> dict[str, int]:
    """How many messages wait in each of `queues` (not those a worker took), through
    kombu's own queue API: one connection, one passive declare per queue."""
    sizes = {}
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        for queue in queues:
            try:
                sizes[queue] = channel.queue_declare(queue=queue, passive=True).message_count
            except ChannelError:  # no such queue: no message was ever left in it
                sizes[queue] = 0
    return sizes
