"""A generation task's Celery message, written straight into the broker's Redis list.

Celery's `send_task` spent ~0.8 ms of the web's CPU per run (a producer from its pool,
the task message built through several layers, `saferepr` of the arguments, kombu's
envelope), where the message itself is one JSON document LPUSHed onto the queue's
list: this module builds that document (Celery's task protocol 2 inside kombu's Redis
transport envelope, field for field what `send_task` wrote for these tasks) and hands
it over as a (key, payload) pair, so the caller can push it in the same round trip as
the fair queue's record (chatsite.runs.fair_queue). The worker consumes it as any
other Celery message.

Only a Redis broker takes the message this way (`direct()`); any other broker gets
Celery's own `send_task`.
"""
import base64
import json
import os
import socket
import uuid
from functools import cache

from django.conf import settings

from chatsite.runs.queues import GENERATE_TASK

# The generation task takes no callbacks, chains or chords.
_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


@cache
def _origin() -> str:
    return f"gen{os.getpid()}@{socket.gethostname()}"


@cache
def direct() -> bool:
    """Whether the broker is Redis, so a message can be pushed onto its list."""
    return settings.CELERY_BROKER_URL.split("://", 1)[0] in ("redis", "rediss", "unix")


@cache
def same_redis() -> bool:
    """Whether the broker is the platform's own Redis (the default): a message can then
    be pushed by the same script that records its run."""
    return direct() and settings.CELERY_BROKER_URL == settings.REDIS_URL


def generate_message(queue: str, run_id: int, kwargs: dict) -> tuple[str, str]:
    """The list key and the payload of a `workers.generate_run` message for `run_id`
    on `queue` (priority 0: the queue's own list)."""
    task_id = str(uuid.uuid4())
    body = json.dumps([[run_id], kwargs, _EMBED])
    envelope = {
        "body": base64.b64encode(body.encode()).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {
            "lang": "py", "task": GENERATE_TASK, "id": task_id, "shadow": None, "eta": None, "expires": None,
            "group": None, "group_index": None, "retries": 0, "timelimit": [None, None], "root_id": task_id,
            "parent_id": None, "argsrepr": f"[{run_id}]", "kwargsrepr": repr(kwargs), "origin": _origin(),
            "ignore_result": True, "replaced_task_nesting": 0, "stamped_headers": None, "stamps": {},
        },
        "properties": {
            "correlation_id": task_id, "reply_to": "", "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": queue}, "priority": 0,
            "body_encoding": "base64", "delivery_tag": str(uuid.uuid4()),
        },
    }
    return queue, json.dumps(envelope)


_broker = None


def _broker_client():
    global _broker
    if _broker is None:
        import redis

        _broker = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=3, socket_timeout=30)
    return _broker


def send_generate(queue: str, run_id: int, kwargs: dict) -> None:
    """Send one generation task message: an LPUSH onto a Redis broker, else Celery's send_task."""
    if direct():
        key, payload = generate_message(queue, run_id, kwargs)
        if same_redis():
            from chatsite.redis_client import get_redis

            get_redis().lpush(key, payload)
        else:
            _broker_client().lpush(key, payload)
        return
    from chatsite.celery import app

    app.send_task(GENERATE_TASK, args=[run_id], kwargs=kwargs, queue=queue, ignore_result=True,
                  result_cls=_Sent, add_to_parent=False)


class _Sent:
    """What send_task returns for a task whose result nobody reads. Celery's default
    AsyncResult builds the result backend, per thread: under ASGI every request has
    its own thread, and that build scanned the installed packages' entry points."""

    __slots__ = ("id", "ignored")

    def __init__(self, task_id: str):
        self.id = task_id
