"""The credential a queued message was queued through, checked when its turn comes
(chatsite.runs.services.queued, chatsite.tenancy.revocation.grant_revoked): access ended
after it was queued refuses it; access ended before (and granted again) does not; an
expired grant is refused, to be retried."""
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from chatsite.chats.models import QueuedMessage
from chatsite.runs.admission import Ask, Caller, InChat, Send, run_submit
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.queued.add import message_send_or_queue
from chatsite.runs.services.queued.edit import queued_retry
from chatsite.tenancy.models import Membership, Revocation
from chatsite.tenancy.revocation import MEMBER, session_credential
from tests.factories import queueing_pool
from tests.runs.helpers import finish_run

pytestmark = pytest.mark.django_db(transaction=True)  # a run's end starts the queue after its commit
Q = QueuedMessage.State
SESSION = session_credential("a-browser-session")


@pytest.fixture
def pool(db):
    """A pool no worker serves, even with the live stack up in this session: these tests
    commit, so their runs are dispatched, and they end the runs themselves."""
    return queueing_pool("unserved")


def _queue(chat, content) -> QueuedMessage:
    ask = Ask(caller=Caller(chat.tenant, chat.owner, credential=SESSION), where=InChat(chat.pk), turn=Send(content))
    sent = message_send_or_queue(ask=ask)
    assert isinstance(sent, QueuedMessage), sent
    return sent


def test_a_password_changed_after_queueing_refuses_a_message_a_session_queued(chat):
    first = run_submit(chat=chat, content="one")
    item = _queue(chat, "two")
    chat.owner.set_password("another-password-1234")
    chat.owner.save()  # every session of the user signed out
    finish_run(first)
    item.refresh_from_db()
    assert item.state == Q.REFUSED and item.run_id is None
    assert item.error == "its sender's password was changed after it was queued (which signs every session out)"


def test_access_ended_and_granted_again_before_queueing_does_not_refuse_it(chat):
    Membership.objects.filter(tenant=chat.tenant, user=chat.owner).delete()
    Membership.objects.create(tenant=chat.tenant, user=chat.owner)
    Revocation.objects.filter(kind=MEMBER).update(revoked_at=timezone.now() - timedelta(minutes=1))  # a while ago
    first = run_submit(chat=chat, content="one")
    item = _queue(chat, "two")
    finish_run(first)
    item.refresh_from_db()
    assert item.state == Q.STARTED, item.error


def test_a_message_queued_longer_ago_than_revocations_are_kept_is_refused_to_be_retried(chat):
    first = run_submit(chat=chat, content="one")
    item = _queue(chat, "two")
    kept = settings.CHATSITE["REVOCATION_TTL_SECONDS"]
    QueuedMessage.objects.filter(pk=item.pk).update(granted_at=timezone.now() - timedelta(seconds=kept))
    finish_run(first)
    item.refresh_from_db()
    assert item.state == Q.REFUSED and "retry it" in item.error
    retried = queued_retry(tenant=chat.tenant, user=chat.owner, chat_id=chat.pk, queued_id=item.pk,
                           credential=SESSION)
    assert retried.state == Q.STARTED and GenerationRun.objects.filter(chat=chat).count() == 2
