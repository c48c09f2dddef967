"""Starting a chat's next waiting message when no reply is in progress: on a run's end,
after a queueing, an edit's retry or a send now, and by the sweep for a queue whose
advance was lost (chatsite.runs.services.queued)."""
import logging
from dataclasses import replace
from datetime import timedelta

from django.db import transaction
from django.db.models import Exists, Min, OuterRef
from django.utils import timezone

from chatsite import stage_trace
from chatsite.chats.models import QueuedMessage
from chatsite.errors import ModelUnavailable, NotFound, Overloaded, RateLimited, ServiceError
from chatsite.runs.admission import ReplyInProgress, run_admit
from chatsite.runs.admission.ask import Steering
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.queued import steering
from chatsite.runs.services.queued.access import access_ended
from chatsite.runs.services.queued.rows import State, ask_of, changed, queue_head
from chatsite.runs.store import turns as store_turns

logger = logging.getLogger(__name__)

# Refusals that may pass (the tenant's rate or runs at once, a busy or restarting pool): the
# message waits on if the refusal says it passes within PASSING_SECONDS (a budget used up
# says when its period renews: hours, mostly), and is refused otherwise. The sweep tries a
# waiting one again from its retry time (`not_before`).
TRANSIENT = (RateLimited, Overloaded, ModelUnavailable)
PASSING_SECONDS = 300
SWEEP_GRACE = timedelta(seconds=5)  # a queue its run's end is starting right now is left to it
SWEEP_CHATS = 500  # chats a sweep starts at most, the longest untouched first


def queue_advance(*, chat_id: int) -> QueuedMessage | None:
    """Start the chat's first queued message if no reply is in progress: its run admitted
    through the door and the message marked started in one transaction, under the chat's
    lock (so never twice). A message the door refuses for good, or whose sender lost
    access to the chat or whose credential ended since it was queued (a key revoked, a
    session signed out), is marked refused (its error kept, its owner told) and the next one
    tried; a refusal that passes within PASSING_SECONDS leaves it queued, the reason in its
    `error`, for the sweep to try again from its `not_before`. Returns the message started,
    if any."""
    stage_trace.mark("queue.advance")
    while True:
        with transaction.atomic():
            try:
                store_turns.chat_lock(chat_id=chat_id)
            except NotFound:  # the chat was deleted, its queue with it
                return None
            found = queue_head(chat_id=chat_id)
            if found is None:
                return None
            head = found.item
            if (ended := access_ended(head, member=found.sender_member)) is not None:
                _refuse(head, ended)
                continue
            try:  # a refusal writes nothing: the door's own savepoint rolls back whatever it began
                admitted = run_admit(ask_of(head))
            except ReplyInProgress:
                return None
            except ServiceError as refused:
                if _passes(refused):
                    logger.info("chat %s: queued message %s waits (%s)", chat_id, head.pk, refused.message)
                    told = head.error == refused.message
                    head.error = refused.message
                    head.not_before = timezone.now() + timedelta(seconds=refused.retry_after)
                    head.save(update_fields=["error", "not_before", "updated_at"])
                    if not told:  # the panel says why it waits
                        changed(head.chat)
                    return None
                _refuse(head, refused.message)
                continue
            _started(head, admitted)
            changed(head.chat)
            return head


def queue_start_steering(item: QueuedMessage, stops: Steering, *, also: tuple = ()) -> QueuedMessage | None:
    """Start `item`, locked and moved to the head of its chat's queue by a send now, as the
    turn after the reply it stops, whether still being written or not (`stops`,
    Ask.steering), in the caller's transaction, under the chat's lock it holds. Its sender is
    the caller, whose live credential the request checked: not the one that queued it
    (access_ended), as when its turn comes later. None, writing nothing, when the door refuses
    it now: it starts after the reply's end instead (queue_advance, which refuses it then or
    lets it wait). `also`: fields of the message the caller set, saved with its start."""
    try:
        admitted = run_admit(replace(ask_of(item), steering=stops))
    except ServiceError as refused:
        logger.info("chat %s: queued message %s starts after the reply it stops (%s)", item.chat_id, item.pk,
                    refused.message)
        return None
    return _started(item, admitted, also=also)


def _started(head: QueuedMessage, admitted, *, also: tuple = ()) -> QueuedMessage:
    head.state, head.run, head.error = State.STARTED, admitted.run, ""
    head.save(update_fields=["state", "run", "error", "updated_at", *also])
    return head


def queue_start_next(sender=None, *, chat_id: int, run_id: int | None = None, **signal) -> None:
    """A run of the chat ended with messages queued (finalize's `queue_waiting`, `run_id`
    the run): start the next, unless a send-now request waits to start it (steering). A
    failure is logged: the sweep starts a queue left waiting."""
    if run_id is not None and steering.is_awaited(run_id):
        return
    try:
        queue_advance(chat_id=chat_id)
    except Exception:
        logger.exception("chat %s: could not start its next queued message; the sweep will", chat_id)


def queues_sweep() -> int:
    """Start the queues no ending started (its process died between the run's end and the
    queue's advance) or a passing refusal held: chats with a message queued for
    SWEEP_GRACE, none to be tried later (`not_before`), and no reply in progress; up to
    SWEEP_CHATS, the longest untouched first. Returns how many messages started."""
    now = timezone.now()
    later = QueuedMessage.objects.filter(chat_id=OuterRef("chat_id"), state=State.QUEUED, not_before__gt=now)
    chats = (QueuedMessage.objects.filter(state=State.QUEUED, updated_at__lt=now - SWEEP_GRACE)
             .filter(~Exists(later)).exclude(chat__runs__status__in=GenerationRun.ACTIVE)
             .values("chat_id").annotate(untouched=Min("updated_at")).order_by("untouched", "chat_id"))
    started = 0
    for chat_id in [row["chat_id"] for row in chats[:SWEEP_CHATS]]:
        try:
            started += queue_advance(chat_id=chat_id) is not None
        except Exception:
            logger.exception("sweep: chat %s's queue could not be started; going on with the others", chat_id)
    return started


def _refuse(item: QueuedMessage, why: str) -> None:
    item.state, item.error = State.REFUSED, why
    item.save(update_fields=["state", "error", "updated_at"])
    changed(item.chat)


def _passes(refused: ServiceError) -> bool:
    return isinstance(refused, TRANSIENT) and refused.retry_after is not None and refused.retry_after <= PASSING_SECONDS
