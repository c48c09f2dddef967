"""Queueing a message: sent to a busy chat (or one whose queue waits), it is checked as
the door checks a turn and written in the chat's queue (chatsite.runs.services.queued)."""
from django.db import transaction
from django.utils import timezone

from chatsite.chats.models import QueuedMessage
from chatsite.errors import InvalidInput
from chatsite.runs.admission import Admitted, Ask, InChat, QueueWaiting, ReplyInProgress, Send, idempotency, run_admit
from chatsite.runs.admission.door import run_count_rate
from chatsite.runs.admission.plan import plan as plan_turn
from chatsite.runs.services.queued.advance import queue_advance
from chatsite.runs.services.queued.rows import State, changed, last_place, queued_earlier
from chatsite.runs.store import turns as store_turns


def message_send_or_queue(*, ask: Ask, queue: bool = True) -> Admitted | QueuedMessage:
    """A new message sent to a chat: admitted at once (as run_admit does) when the chat has
    no reply in progress and nothing queued; queued behind the messages waiting when it has
    some (the door decides, under the chat's lock: a message never overtakes the queue); and,
    with `queue` (the queue flag), queued too while a reply is in progress. Raises what
    run_admit raises for the message itself (400, 404, 429, 503; ReplyInProgress, 409,
    without `queue`), and InvalidInput when the chat's queue is full. A repeat of a message
    still queued (its Idempotency-Key) gets it back before the door counts the tenant's rate."""
    key = idempotency.check_key(ask.idempotency_key)
    if key and (earlier := queued_earlier(ask, key, idempotency.ask_digest(ask))) is not None \
            and earlier.state != State.STARTED:  # a started one's run: the door replays it, counting nothing
        return earlier
    try:
        return run_admit(ask)
    except QueueWaiting:
        pass
    except ReplyInProgress:
        if not queue:
            raise
    return queued_add(ask=ask, counted=True)  # the door counted it against the tenant's rate, refusing it


def queued_add(*, ask: Ask, counted: bool = False) -> QueuedMessage | Admitted:
    """Queue `ask` (a Send in one of the caller's chats), checked now as the door checks
    it: its Idempotency-Key (a repeat of the owner's request gets what the first made: its
    queued message, or its run, replayed; the key with another request is 409
    idempotency_key_reused), its plan (400, 404), the tenant's rate (429: counted here, once,
    unless `counted`, the door having counted it; never again when its turn comes). Starts
    the chat's queue once committed (the reply it waited for may have ended meanwhile)."""
    if not isinstance(ask.turn, Send) or not isinstance(ask.where, InChat) or ask.turn.edit_of is not None:
        raise InvalidInput("only a new message can be queued", field="queue")
    key = idempotency.check_key(ask.idempotency_key)
    asked = idempotency.ask_digest(ask) if key else ""
    if key and idempotency.earlier(ask, key, asked) is not None:
        return run_admit(ask)  # it made its run already (admitted, or queued and started): the door replays it
    plan = plan_turn(ask)  # 400/404 now, not when its turn comes
    chat = plan.chat
    if not counted:
        if key and (earlier := queued_earlier(ask, key, asked)) is not None:  # a repeat costs no rate count
            return earlier
        run_count_rate(ask)
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat.pk)
        if key and (earlier := queued_earlier(ask, key, asked)) is not None:  # a repeat that committed first
            return earlier
        item = QueuedMessage.objects.create(
            chat=chat, tenant=ask.caller.tenant, owner=ask.caller.user, content=plan.content,
            position=last_place(chat),
            request={"sampling": ask.sampling, "model": ask.model, "tier": ask.tier, "source": ask.source,
                     "idempotency_key": key},
            credential=ask.caller.credential, granted_at=timezone.now())
        changed(chat)
        transaction.on_commit(lambda: queue_advance(chat_id=chat.pk))
    item.refresh_from_db()
    return item
