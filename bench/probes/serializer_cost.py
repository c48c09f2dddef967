"""What does the REST answer's serialization cost, in instructions (callgrind)?

    .venv/bin/python -m bench.probes.serializer_cost [--root DIR] [--iterations 100]

Two shapes, on rows built in memory (no database, no Redis: the serializers alone):
- `post`: a message POST's answer (`views_messages.posted`: the run and the turn's two
  messages, the reply's message with its run);
- `list`: a page of 50 messages (`GET .../messages/`), half of them replies with runs.

Each shape runs under valgrind's callgrind twice, 0 and N times after the same setup (a list
N / 10 times), with one hash seed; the difference over N is its instructions per answer,
steady however busy the machine is.
`--root DIR` serializes with another checkout's code (this file is run from here, its
imports from there): an A/B of two checkouts."""
import argparse
import os
import sys
from pathlib import Path

from bench import common

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
SHAPES = ("post", "list")


def _rows():
    from datetime import timedelta
    from django.utils import timezone

    from chatsite.chats.models import Chat, Message
    from chatsite.pools.models import ModelPool
    from chatsite.runs.models import GenerationRun

    now = timezone.now()
    pool = ModelPool(pk=1, name="flagship")
    chat = Chat(pk=1, tenant_id=1, owner_id=1, pool=pool)
    msgs, runs = [], []
    for i in range(50):
        role = Message.Role.ASSISTANT if i % 2 else Message.Role.USER
        msg = Message(pk=100 + i, chat=chat, role=role, content=f"message {i} " * 20, token_count=40,
                      created_at=now, parent_id=99 + i if i else None)
        if role == Message.Role.ASSISTANT:
            run = GenerationRun(pk=1000 + i, chat=chat, pool=pool, tenant_id=1, status="completed",
                                tier="interactive", attempt=1, user_message=msgs[-1], assistant_message=msg,
                                max_tokens=64, seed=7, sampling={"temperature": 0.7, "top_p": 1.0, "stop": []},
                                queued_at=now, started_at=now, first_token_at=now,
                                finished_at=now + timedelta(seconds=2), ttft_ms=40, itl_ms=12.5,
                                prompt_tokens=30, completion_tokens=40, finish_reason="stop", error="")
            msg.run = run
            runs.append(run)
        msgs.append(msg)
    return chat, msgs, runs


def inner(shape: str, iterations: int) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings_test")
    import django

    django.setup()
    from types import SimpleNamespace

    from chatsite.api import serializers as s
    from chatsite.api.views_messages import posted

    chat, msgs, runs = _rows()
    versions = {m.pk: [m.pk] for m in msgs}
    if shape == "post":
        admitted = SimpleNamespace(run=runs[0], chat=chat, versions=versions)
        answer = lambda: posted(admitted)  # noqa: E731
    else:
        answer = lambda: s.MessageSerializer(msgs, many=True, context={"versions": versions}).data  # noqa: E731
    answer()  # the first call's imports and caches belong to the setup, in both counts
    for _ in range(iterations):
        answer()


def _instructions(root: str, shape: str, iterations: int) -> int:
    env = {**os.environ, "PYTHONPATH": root, "DJANGO_SETTINGS_MODULE": "chatsite.settings_test", "PYTHONHASHSEED": "0"}
    return common.callgrind_instructions([sys.executable, str(HERE), "--inner", shape, "--iterations", str(iterations)],
                                         cwd=root, env=env)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(ROOT))
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--inner", choices=SHAPES)
    a = ap.parse_args()
    if a.inner:
        return inner(a.inner, a.iterations)
    for shape in SHAPES:
        n = a.iterations if shape == "post" else max(1, a.iterations // 10)
        base, loaded = _instructions(a.root, shape, 0), _instructions(a.root, shape, n)
        print(f"{shape}: {(loaded - base) / n / 1e3:,.1f} k instructions per answer "
              f"(code of {a.root}; {n} answers under callgrind)", flush=True)


if __name__ == "__main__":
    main()
