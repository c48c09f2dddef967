"""Admission's statements: a turn's question and replies in one INSERT, the chat's new path
end saved by the run's INSERT, and no savepoint for a /v1 call's admission unless it can
recover from something (chatsite/runs/services/admission.py)."""
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from chatsite import rows
from chatsite.chats.models import Chat, Message
from chatsite.chats.services import chat_create_with_history
from chatsite.runs import routing
from chatsite.runs.models import GenerationRun
from chatsite.runs.services import admission, run_submit

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_parent_and_its_children_are_one_statement_and_come_back_linked(chat):
    parent = Message(chat=chat, depth=0, role=Message.Role.USER, content="question", token_count=1)
    children = [Message(chat=chat, parent=parent, depth=1, role=Message.Role.ASSISTANT, content=f"v{i}")
                for i in range(3)]
    with CaptureQueriesContext(connection) as queries:
        rows.Insert(Message).save_with_children(parent, children, link="parent")
    assert len(queries) == 1, [q["sql"] for q in queries]
    assert parent.pk is not None and all(c.parent_id == parent.pk and c.parent is parent for c in children)
    saved = {m.pk: m for m in Message.objects.filter(chat=chat)}
    assert saved[parent.pk].parent_id is None and saved[parent.pk].content == "question"
    assert [(saved[c.pk].parent_id, saved[c.pk].content) for c in children] == [(parent.pk, "v0"), (parent.pk, "v1"),
                                                                                (parent.pk, "v2")]
    assert [c.pk for c in children] == sorted(c.pk for c in children)  # in the order given


def test_the_chats_new_path_end_and_title_are_saved_by_the_runs_insert(chat):
    with CaptureQueriesContext(connection) as queries:
        run = run_submit(chat=chat, content="A new   turn")
    sql = [q["sql"] for q in queries]
    chats, runs = Chat._meta.db_table, GenerationRun._meta.db_table
    assert not [s for s in sql if s.startswith(f'UPDATE "{chats}"')], sql
    [insert] = [s for s in sql if f'INSERT INTO "{runs}"' in s]
    assert insert.startswith(f'WITH along AS (UPDATE "{chats}"'), insert
    chat.refresh_from_db()
    assert chat.current_leaf_id == run.assistant_message_id and chat.title == "A new turn"


def _admitted(user, tenant, **kwargs) -> tuple[GenerationRun, list[str]]:
    with CaptureQueriesContext(connection) as queries, transaction.atomic():  # as completion_submit
        chat = chat_create_with_history(tenant=tenant, owner=user, model="flagship", history=[])
        run = run_submit(chat=chat, content="From a script", source=GenerationRun.Source.OPENAI, **kwargs)
    return run, [q["sql"] for q in queries]


def test_a_v1_calls_admission_takes_no_savepoint_unless_it_has_an_idempotency_key(user, tenant, pool):
    run, sql = _admitted(user, tenant)
    assert not [s for s in sql if "SAVEPOINT" in s], sql
    assert run.unpinned  # the router asks no worker's pin for a chat nobody served
    assert [m.role for m in Message.objects.filter(chat=run.chat_id).order_by("depth")] == ["user", "assistant"]
    run, sql = _admitted(user, tenant, idempotency_key="k-1")  # a race on the key is caught and recovered from
    assert [s for s in sql if s.startswith("SAVEPOINT")], sql


def test_a_failure_in_a_v1_calls_admission_leaves_nothing(user, tenant, pool, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the snapshot broke")

    monkeypatch.setattr(admission, "_snapshot", broken)
    chats, messages = Chat.objects.count(), Message.objects.count()
    with pytest.raises(RuntimeError):
        _admitted(user, tenant)
    assert (Chat.objects.count(), Message.objects.count()) == (chats, messages)
    assert not GenerationRun.objects.exists()


def test_the_router_reads_the_pin_of_a_chat_that_has_served_a_turn(chat, monkeypatch):
    run = run_submit(chat=chat, content="Hello")
    assert not run.unpinned
    asked = []
    monkeypatch.setattr(routing, "get_redis", lambda: type("R", (), {"get": lambda self, key: asked.append(key)})())
    routing.queue_for(run)
    assert asked == [f"chat:{chat.pk}:worker"]
    run.unpinned = True
    routing.queue_for(run)
    assert len(asked) == 1
