"""A waiting message's owner changes it before it starts: its text edited, withdrawn, or
(refused when its turn came) queued again (chatsite.runs.services.queued)."""
from dataclasses import replace

from django.db import transaction
from django.utils import timezone

from chatsite.chats.models import QueuedMessage
from chatsite.chats.selectors import chat_get
from chatsite.runs.admission import Send
from chatsite.runs.admission.plan import plan as plan_turn
from chatsite.runs.services.queued.advance import queue_advance
from chatsite.runs.services.queued.rows import State, ask_of, changed, last_place, waiting_item
from chatsite.runs.store import turns as store_turns


def queued_edit(*, tenant, user, chat_id, queued_id, content) -> QueuedMessage:
    """A queued (or refused) message's new text, checked as the message it is (its own pool
    and settings); a refused one stays refused until retried. Raises NotFound, Conflict
    once it has started or was withdrawn, InvalidInput for empty or overlong text."""
    chat = chat_get(tenant=tenant, user=user, chat_id=chat_id)
    asked = ask_of(waiting_item(chat, queued_id, State.QUEUED, State.REFUSED, lock=False))
    text = plan_turn(replace(asked, turn=Send(content))).content  # as the message it is; before any lock
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat.pk)  # the queue's writers change it one at a time, as add and advance do
        item = waiting_item(chat, queued_id, State.QUEUED, State.REFUSED)
        item.content = text
        item.save(update_fields=["content", "updated_at"])
        changed(chat)
    return item


def queued_withdraw(*, tenant, user, chat_id, queued_id) -> QueuedMessage:
    """Take a queued message back before it starts (or a refused one off the queue's list).
    Raises NotFound, Conflict once started."""
    chat = chat_get(tenant=tenant, user=user, chat_id=chat_id)
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat.pk)
        item = waiting_item(chat, queued_id, State.QUEUED, State.REFUSED)
        item.state = State.WITHDRAWN
        item.save(update_fields=["state", "updated_at"])
        changed(chat)
    return item


def queued_retry(*, tenant, user, chat_id, queued_id, credential: str = "") -> QueuedMessage:
    """Queue a refused message again, behind the messages waiting (started at once, once
    committed, when nothing is in progress or waiting), under the retrying request's
    `credential` from now on. Raises NotFound, Conflict unless it was refused, InvalidInput
    when the chat's queue is full."""
    chat = chat_get(tenant=tenant, user=user, chat_id=chat_id)
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat.pk)
        item = waiting_item(chat, queued_id, State.REFUSED)
        item.state, item.error, item.position, item.not_before = State.QUEUED, "", last_place(chat), None
        item.credential, item.granted_at = credential, timezone.now()
        item.save(update_fields=["state", "error", "position", "not_before", "credential", "granted_at",
                                 "updated_at"])
        changed(chat)
        transaction.on_commit(lambda: queue_advance(chat_id=chat.pk))
    item.refresh_from_db()
    return item
