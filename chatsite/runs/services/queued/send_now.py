"""Steering: a waiting message sent now, the reply in progress stopped at its next token
(chatsite.runs.services.queued)."""
import logging

from django.db import transaction
from django.db.models import Min

from chatsite import stage_trace
from chatsite.chats.models import QueuedMessage
from chatsite.chats.selectors import chat_get
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.cancel import run_cancel
from chatsite.runs.services.finalize import run_finalize_if_ended
from chatsite.runs.services.queued.advance import queue_advance, queue_start_next
from chatsite.runs.services.queued import steering
from chatsite.runs.services.queued.rows import State, changed, waiting_item
from chatsite.runs.store import turns as store_turns
from chatsite.runs.stream import log

# How long a send now waits for the stop it asked to be written, to start its message itself
# (steering); a stop that takes longer (its worker paused) is left to the run's end, which
# starts the queue wherever it is saved.
STOP_WAIT_SECONDS = 1.0

logger = logging.getLogger(__name__)


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
        # This request starts the message as soon as the stop is written; the run's end, wherever it
        # is saved, leaves it to this request until it has (steering), and starts it otherwise.
        with steering.awaited(active.pk, seconds=STOP_WAIT_SECONDS):
            run_cancel(run=active)
            stopped = log.wait_ended(active.pk, timeout=STOP_WAIT_SECONDS)
            if stopped:
                _start_after(active.pk, chat_id=chat.pk)
        if not stopped and log.has_ended(active.pk):  # written as the wait ended: its end may have left it here
            _start_after(active.pk, chat_id=chat.pk)
    else:
        queue_advance(chat_id=chat.pk)
    item.refresh_from_db()
    return item


def _start_after(run_id: int, *, chat_id: int) -> None:
    """The stopped reply saved in a commit of its own (if its worker has not saved it yet),
    then the message started: the worker's own save (which adds the reply's kept ids) waits
    for that commit at most, not for the steered turn's admission, and is over before the
    steered run reaches the worker. A failure is logged, not answered: the stop was asked,
    and the sweep starts a queue left waiting."""
    try:
        run_finalize_if_ended(run_id=run_id)
    except Exception:
        logger.exception("run %s: could not save its stopped reply; its worker will", run_id)
    queue_start_next(chat_id=chat_id)  # the run's end (this request's save or its worker's) left it here
