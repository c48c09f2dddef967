"""Steering: a waiting message sent now, the reply in progress stopped at its next token
(chatsite.runs.services.queued)."""
import logging

from django.db import transaction
from django.db.models import Min
from django.utils import timezone

from chatsite import stage_trace
from chatsite.chats.models import QueuedMessage
from chatsite.chats.selectors import chat_get
from chatsite.runs.admission.ask import Steering
from chatsite.runs.models import GenerationRun
from chatsite.runs.selectors import reply_to_stop
from chatsite.runs.services.cancel import run_cancel
from chatsite.runs.services.finalize import run_finalize_if_ended
from chatsite.runs.services.queued.advance import queue_advance, queue_start_next, queue_start_steering
from chatsite.runs.services.queued import steering
from chatsite.runs.services.queued.rows import State, changed, waiting_item
from chatsite.runs.store import turns as store_turns
from chatsite.runs.stream import log

# How long a send now waits for the stop it asked to be written, to start its message itself
# (steering); a stop that takes longer (its worker paused) is left to the run's end, which
# starts the queue wherever it is saved.
STOP_WAIT_SECONDS = 1.0

logger = logging.getLogger(__name__)


def queued_send_now(*, tenant, user, chat_id, queued_id, credential: str = "") -> QueuedMessage:
    """Steer: the queued message moves to the head of its chat's queue and the reply in
    progress is stopped at its next token (its partial text kept as the reply, which ends
    `interrupted`); this message runs next, with that reply in its context.

    One read finds the reply and the stop is asked first (the reply's save, however soon, ends
    it "interrupted": its end sees this request's marker, `steering`); then the message is
    admitted while the reply stops, as the turn after it (Ask.steering): its snapshot names the
    reply, which its worker fills in once the reply is saved (workers.steered). The stop, the
    reply's save and the admission overlap.
    Refused so (the tenant's runs at once used up by the two, say), it starts after the
    reply's end, as a queued message does: here, once the stop is written
    (mostly within milliseconds), or where the reply is saved. With no reply in progress it
    starts at once. Its sender now is the request: it goes under the request's `credential`
    from now on (as a retry does). Raises NotFound, Conflict once started (before anything is
    stopped)."""
    found = reply_to_stop(tenant=tenant, user=user, chat_id=chat_id, queued_id=queued_id)  # one read, then the stop
    if found is None:  # nothing to stop (or no such chat or message: NotFound, Conflict)
        return _send_now_idle(chat_get(tenant=tenant, user=user, chat_id=chat_id), queued_id, credential)
    run_id, reply_id = found
    chat_id = int(chat_id)
    started = stopped = False
    try:
        with steering.awaited(run_id, seconds=STOP_WAIT_SECONDS):  # its end leaves the queue to this request
            log.cancel_ask(run_id)
            stage_trace.mark("web.stop_asked", run_id)
            stops = Steering(run_id, reply_id, log.length(run_id))
            # NotFound, Conflict: it left the queue meanwhile (the reply stops all the same)
            item, started = _steer(tenant, user, chat_id, queued_id, stops, credential)
            run_cancel(run=GenerationRun.objects.get(pk=run_id))  # the rest of a Stop: one no attempt holds ends here
            if not started:  # it starts once the stop is written, here, else at the reply's end
                stopped = log.wait_ended(run_id, timeout=STOP_WAIT_SECONDS)
                if stopped:
                    _start_after(run_id, chat_id=chat_id)
    finally:
        if not started and not stopped and log.has_ended(run_id):  # its end may have left the queue here
            _start_after(run_id, chat_id=chat_id)
    if not started:
        item.refresh_from_db()
    return item


def _steer(tenant, user, chat_id: int, queued_id, stops: Steering, credential: str) -> tuple[QueuedMessage, bool]:
    """The message moved to the head, naming the reply it stops, and admitted after that
    reply if the door lets it: (the message, whether it started)."""
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat_id)
        # NotFound, Conflict: it left the queue meanwhile. Its tenant and sender are the caller's: a message
        # waits in its chat's owner's name, and the chat is the caller's (reply_to_stop read it so).
        item = waiting_item(chat_id, queued_id, State.QUEUED, with_chat=True)
        item.tenant, item.owner = tenant, user
        _to_head(item, credential)
        item.interrupted_run_id = stops.run_id
        # Admitted as the turn after the reply: still streaming, its text stands in for (Ask.steering); ended
        # and saved already (a stop can be that quick), as it is. Saved with its start, or else here.
        moved = ("position", "interrupted_run", "credential", "granted_at")
        started = queue_start_steering(item, stops, also=moved) is not None
        if not started:
            item.save(update_fields=[*moved, "updated_at"])
        changed(item.chat, interrupted=stops.run_id)  # its windows label its end
    stage_trace.mark("web.send_now_saved", stops.run_id)
    return item, started


def _send_now_idle(chat, queued_id, credential: str) -> QueuedMessage:
    """No reply in progress: the message moved to the head and started."""
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat.pk)
        item = waiting_item(chat, queued_id, State.QUEUED)
        _to_head(item, credential)
        item.save(update_fields=["position", "credential", "granted_at", "updated_at"])
        changed(chat)
    queue_advance(chat_id=chat.pk)
    item.refresh_from_db()
    return item


def _to_head(item: QueuedMessage, credential: str) -> None:
    """The message first in its chat's queue, sent from now on under `credential` (not saved)."""
    first = QueuedMessage.objects.filter(chat_id=item.chat_id, state=State.QUEUED).aggregate(
        first=Min("position"))["first"]
    if first is not None and first < item.position:
        item.position = first - 1
    item.credential, item.granted_at = credential, timezone.now()


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
