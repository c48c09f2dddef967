"""The test session's flush (tests/db_backend/): every row a test wrote is gone, in tables that
reference each other too; content types and permissions stay as migrate made them."""
import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command

from chatsite.chats.models import Chat, Message
from tests.factories import ChatFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_flush_empties_every_table_and_keeps_content_types_and_permissions():
    kept = [list(ContentType.objects.order_by("pk").values_list()), list(Permission.objects.order_by("pk").values_list())]
    chat = ChatFactory()
    Message.objects.create(chat=chat, role="user", content="Hi")
    assert kept[0] and kept[1]

    call_command("flush", verbosity=0, interactive=False, reset_sequences=False)  # as a transactional test's end

    assert not Chat.objects.exists() and not Message.objects.exists()
    assert [list(ContentType.objects.order_by("pk").values_list()),
            list(Permission.objects.order_by("pk").values_list())] == kept
    assert ChatFactory().pk > chat.pk  # sequences go on, as after Django's TRUNCATE
