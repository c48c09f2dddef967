"""Rows for N runs of the demo user, and each run's events URL (with its token), as JSON.

    python -m bench.make_runs N     (in a stack's environment: DATABASE_URL, REDIS_URL)

The SSE benchmarks write these runs' streams themselves; no worker ever takes them
(they are created straight in the database, not dispatched)."""
import json
import os
import sys


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    django.setup()
    from django.contrib.auth import get_user_model

    from chatsite.api.serializers import RunSerializer
    from chatsite.chats.models import Chat, Message
    from chatsite.pools.models import ModelPool
    from chatsite.runs.models import GenerationRun
    from chatsite.tenancy.models import Tenant

    count = int(sys.argv[1])
    user = get_user_model().objects.get(username="demo")
    tenant = Tenant.objects.get(slug="demo")
    pool = ModelPool.objects.get(name="flagship")
    out = []
    for _ in range(count):
        chat = Chat.objects.create(tenant=tenant, owner=user, pool=pool, title="bench")
        q, a = Message.objects.bulk_create([Message(chat=chat, role="user", content="hi"),
                                            Message(chat=chat, role="assistant", content="")])
        run = GenerationRun.objects.create(tenant=tenant, chat=chat, user_message=q, assistant_message=a, pool=pool,
                                           seed=0, max_tokens=100000, status="running")
        out.append({"id": run.pk, "events_url": RunSerializer(run).data["events_url"]})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
