"""Steering: a waiting message sent now, the reply in progress stopped at its next token
(chatsite.runs.services.queued)."""
from django.db import transaction
from django.db.models import Min

from chatsite import stage_trace
from chatsite.chats.models import QueuedMessage
from chatsite.chats.selectors import chat_get
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.cancel import run_cancel
from chatsite.runs.services.queued.advance import queue_advance, queue_start_next
from chatsite.runs.services.queued.rows import State, changed, waiting_item
from chatsite.runs.store import turns as store_turns
from chatsite.runs.stream import log

# How long a send now waits for the stop it asked to be written, to start its message itself
# (the door saves the stopped reply first); a stop that takes longer (its worker paused) is
# left to the run's end, which starts the queue wherever it is saved.
STOP_WAIT_SECONDS = 1.0


def queued_send_now(*, tenant, user, chat_id, queued_id) -> QueuedMessage:
    """Steer: the queued message moves to the head of its chat's queue and the reply in
    progress is stopped at its next token (its partial text kept as the reply, which ends
    `interrupted`); its end starts this message, with that reply in its context: here, once the
    stop is written (mostly within milliseconds), or where the reply is saved. With no reply in
    progress it starts at once. Raises NotFound, Conflict once started."""
    chat = chat_get(tenant=tenant, user=user, chat_id=chat_id)
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat.pk)
        item = waiting_item(chat, queued_id, State.QUEUED)
        first = QueuedMessage.objects.filter(chat=chat, state=State.QUEUED).aggregate(first=Min("position"))["first"]
        active = GenerationRun.objects.filter(chat=chat, status__in=GenerationRun.ACTIVE).first()
        if first is not None and first < item.position:
            item.position = first - 1
        item.interrupted_run = active
        item.save(update_fields=["position", "interrupted_run", "updated_at"])
        changed(chat, interrupted=active.pk if active is not None else None)  # its windows label its end
    if active is not None:
        stage_trace.mark("web.send_now_saved", active.pk)
        run_cancel(run=active)
        # Its end starts the queue (here, or on its worker as it aborts it); this request starts it as soon
        # as the stop is written, without waiting for the worker to save the reply (a web process is
        # idle here, a worker's process busy with its engine); the chat's lock starts it once.
        if log.wait_ended(active.pk, timeout=STOP_WAIT_SECONDS):
            queue_start_next(chat_id=chat.pk)  # a failure is logged, not answered: the stop was asked
    else:
        queue_advance(chat_id=chat.pk)
    item.refresh_from_db()
    return item
