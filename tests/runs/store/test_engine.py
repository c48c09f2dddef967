"""The store's engine: a pooled connection keeps the statements it marks prepared, and only those."""
import psycopg
import pytest
from django.db import connection

from chatsite.runs.store.backend.base import DatabaseWrapper
from chatsite.runs.store import engine

pytestmark = pytest.mark.django_db


def _prepared(conn) -> set[str]:
    with conn.cursor() as cur:
        cur.execute("SELECT statement FROM pg_prepared_statements", prepare=False)
        return {r[0] for r in cur.fetchall()}


def test_marked_statements_are_prepared_on_first_run_and_others_never():
    settings = {**connection.settings_dict, "OPTIONS": {**connection.settings_dict["OPTIONS"], "server_side_binding": True}}
    params = DatabaseWrapper(settings).get_connection_params()  # the pooled engine's connections
    marked = engine.prepared("SELECT %s::int + 1")
    unmarked = "SELECT %s::int + 2"
    with psycopg.connect(**params) as conn:
        with conn.cursor() as cur:
            cur.execute(marked, [1])
            assert cur.fetchone() == (2,)
            for i in range(10):  # psycopg's own threshold would have prepared it after 5
                cur.execute(unmarked, [i])
                assert cur.fetchone() == (i + 2,)
        statements = _prepared(conn)
    assert statements == {"SELECT $1::int + 1"}


def _through_fields(insert, obj) -> list:
    """The parameters as Model.save makes them: each field's get_db_prep_save(pre_save())."""
    return [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in insert.fields]


def _seen(value):
    """A parameter as Postgres receives it: its type (psycopg's Int4 is not an int) and
    value (a JSON wrapper by what it wraps)."""
    return type(value), getattr(value, "obj", value)


def test_an_inserts_parameters_are_what_the_fields_would_make_of_each_value():
    from chatsite.chats.models import Chat, Message
    from chatsite.runs.models import GenerationRun
    from django.utils import timezone
    from django.utils.functional import lazy

    now = timezone.now()
    lazy_text = lazy(lambda: "lazy", str)()
    run = GenerationRun(tenant_id=1, chat_id=2, owner_id=None, user_message_id=3, assistant_message_id=4, pool_id=5,
                        status=GenerationRun.Status.QUEUED, tier="interactive", source=GenerationRun.Source.OPENAI,
                        seed=2**40, max_tokens=20, sampling={"temperature": 0.5}, prompt_snapshot=[], choice_index=0,
                        raw_prompt=True, keeps_token_ids=False, idempotency_key=lazy_text, request_digest="",
                        reserved_tokens=True,  # a bool where an int goes: int(True), through the field
                        budget_cap=None, queued_at=now, itl_ms=1.5, details=None)
    message = Message(chat_id=2, parent_id=None, depth=3, role=Message.Role.USER, content="hé", token_count=0,
                      created_at=now)
    chat = Chat(tenant_id=1, owner_id=1, title="t", pool_id=None, listed=False, created_at=now, updated_at=now)
    for model, obj in ((GenerationRun, run), (Message, message), (Chat, chat)):
        insert = engine.Insert(model)
        ours, theirs = insert._values(obj, connection), _through_fields(insert, obj)
        auto = [i for i, f in enumerate(insert.fields) if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)]
        for i, f in enumerate(insert.fields):
            if i in auto:  # now(), twice: equal in kind, not in value
                assert type(ours[i]) is type(theirs[i]), f.name
                continue
            assert _seen(ours[i]) == _seen(theirs[i]), f.name
    kinds = {f.name: engine.save_kind(f, connection.ops)[0] for f in engine.Insert(GenerationRun).fields}
    assert kinds["status"] == engine.TEXT and kinds["seed"] == engine.INTEGER and kinds["tenant"] == engine.EXACT
