"""A chat, or a run's choices, is read by its key, then checked for tenant and owner:
never through the (tenant, owner, ...) index, which the planner may take when its
statistics lag and then reads every chat of the user (store.reads)."""
import pytest
from django.db import connection

from chatsite.chats import selectors as chat_selectors
from chatsite.errors import NotFound
from chatsite.runs import selectors as run_selectors
from chatsite.runs.store import reads
from tests.factories import ChatFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


def _analyze() -> None:
    with connection.cursor() as cur:
        cur.execute("ANALYZE chats_chat")
        cur.execute("ANALYZE runs_generationrun")


def _plan(sql: str, params: list) -> str:
    """The plan of `sql` prepared, with the generic plan a prepared statement may run on."""
    numbered = sql.replace("%s", "${}").format(*range(1, len(params) + 1))
    with connection.cursor() as cur:
        cur.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cur.execute(f"PREPARE key_lookup AS {numbered}")
        try:
            cur.execute(f"EXPLAIN EXECUTE key_lookup({', '.join(str(int(p)) for p in params)})")
            return "\n".join(r[0] for r in cur.fetchall())
        finally:
            cur.execute("DEALLOCATE key_lookup")


@pytest.fixture
def many_chats(tenant, user, pool):
    from chatsite.chats.models import Chat

    _analyze()  # the statistics taken while the user has no chats: they lag, as after a burst of new ones
    Chat.objects.bulk_create([Chat(tenant=tenant, owner=user, pool=pool, title=f"c{i}") for i in range(3000)])
    return Chat.objects.filter(owner=user).order_by("-id")[0]


def test_a_turns_chat_is_read_by_its_key_however_many_chats_its_user_has(many_chats, tenant, user):
    plan = _plan(str(reads._CHAT_FOR_TURN), [many_chats.pk, tenant.pk, tenant.pk, user.pk])
    assert "chats_chat_pkey" in plan and "chats_chat_tenant_" not in plan, plan


def test_the_key_read_still_keeps_other_tenants_and_users_out(many_chats, tenant, user):
    assert chat_selectors.chat_get(tenant=tenant, user=user, chat_id=many_chats.pk).pk == many_chats.pk
    assert reads.chat_for_turn(tenant=tenant, user_id=user.pk, chat_id=many_chats.pk).chat.pk == many_chats.pk
    for other_tenant, other_user in ((TenantFactory(), user), (tenant, UserFactory(tenant=tenant))):
        with pytest.raises(NotFound):
            chat_selectors.chat_get(tenant=other_tenant, user=other_user, chat_id=many_chats.pk)
        with pytest.raises(NotFound):
            reads.chat_for_turn(tenant=other_tenant, user_id=other_user.pk, chat_id=many_chats.pk)


def test_a_runs_choices_are_read_by_their_keys_within_its_tenant(chat):
    from chatsite.runs.admission import run_submit

    first = run_submit(chat=chat, content="three ways", choices=3)
    choices = run_selectors.run_choices(first)
    assert [(c.pk == first.pk or c.choice_of_id == first.pk, c.choice_index) for c in choices] == \
        [(True, 0), (True, 1), (True, 2)]
    assert all(c.pool.name == chat.pool.name and c.assistant_message.pk for c in choices)
    first.tenant_id = TenantFactory().pk  # another tenant asking for them
    assert run_selectors.run_choices(first) == []
