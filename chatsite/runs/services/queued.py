"""Messages sent while a reply is being written: queued in the chat, started one at a
time, in order, through the one door when the reply in progress ends (completed,
stopped, failed or swept: run_finalize calls queue_advance), or sent now (the reply
in progress stops at its next token and this message runs next, after it). One its turn
found refused for good (a budget used up) stays in the queue's list, refused, with the
reason, until its owner retries or withdraws it; a refusal that passes within minutes (the
tenant's rate, a busy or restarting pool) leaves it waiting, the reason kept.

The queue is rows in Postgres (chats.QueuedMessage): it survives a reload, a web
restart and a worker crash. A message starts under its chat's lock, in the transaction
that admits its run, so none starts twice; a queue whose advance was lost (a process
that died after its run ended) is started again by the sweep (queues_sweep)."""
import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from chatsite.chats import live
from chatsite.chats.models import Chat, QueuedMessage
from chatsite.chats.selectors import chat_get
from chatsite.errors import Conflict, InvalidInput, ModelUnavailable, NotFound, Overloaded, RateLimited, ServiceError
from chatsite.runs.admission import Admitted, Ask, Caller, InChat, QueueWaiting, ReplyInProgress, Send, run_admit
from chatsite.runs.admission.plan import plan as plan_turn
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.cancel import run_cancel
from chatsite.runs.store import turns as store_turns

logger = logging.getLogger(__name__)

MAX_QUEUED_PER_CHAT = 20
# Refusals that may pass (the tenant's rate or runs at once, a busy or restarting pool): the
# message waits on if the refusal says it passes within PASSING_SECONDS (a budget used up
# says when its period renews: hours, mostly), and is refused otherwise.
TRANSIENT = (RateLimited, Overloaded, ModelUnavailable)
PASSING_SECONDS = 300
SWEEP_GRACE = timedelta(seconds=5)  # a queue its run's end is starting right now is left to it
State = QueuedMessage.State


def message_send_or_queue(*, ask: Ask, queue: bool = True) -> Admitted | QueuedMessage:
    """A new message sent to a chat: admitted at once (as run_admit does) when the chat has
    no reply in progress and nothing queued; queued behind the messages waiting when it has
    some (the door decides, under the chat's lock: a message never overtakes the queue); and,
    with `queue` (the queue flag), queued too while a reply is in progress. Raises what
    run_admit raises for the message itself (400, 404, 429, 503; ReplyInProgress, 409,
    without `queue`), and InvalidInput when the chat's queue is full."""
    try:
        return run_admit(ask)
    except QueueWaiting:
        pass
    except ReplyInProgress:
        if not queue:
            raise
    return queued_add(ask=ask)


def queued_add(*, ask: Ask) -> QueuedMessage:
    """Queue `ask` (a Send in one of the caller's chats), checked now as the door checks
    it, and start the chat's queue once committed (the reply it waited for may have
    ended meanwhile). A repeat with the same Idempotency-Key returns the first one."""
    if not isinstance(ask.turn, Send) or not isinstance(ask.where, InChat) or ask.turn.edit_of is not None:
        raise InvalidInput("only a new message can be queued", field="queue")
    plan = plan_turn(ask)  # 400/404 now, not when its turn comes
    chat, key = plan.chat, ask.idempotency_key
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat.pk)
        mine = QueuedMessage.objects.filter(chat=chat)
        if key and (earlier := mine.filter(owner=ask.caller.user, request__idempotency_key=key).first()):
            return earlier
        item = QueuedMessage.objects.create(
            chat=chat, tenant=ask.caller.tenant, owner=ask.caller.user, content=plan.content,
            position=_last_place(chat),
            request={"sampling": ask.sampling, "model": ask.model, "tier": ask.tier, "source": ask.source,
                     "idempotency_key": key})
        _changed(chat)
        transaction.on_commit(lambda: queue_advance(chat_id=chat.pk))
    item.refresh_from_db()
    return item


def queued_edit(*, tenant, user, chat_id, queued_id, content) -> QueuedMessage:
    """A queued (or refused) message's new text; a refused one stays refused until retried.
    Raises NotFound, Conflict once it has started or was withdrawn, InvalidInput for empty
    or overlong text."""
    chat = chat_get(tenant=tenant, user=user, chat_id=chat_id)
    ask = Ask(caller=Caller(tenant, user), where=InChat(chat.pk), turn=Send(content))
    with transaction.atomic():
        item = _waiting_item(chat, queued_id, State.QUEUED, State.REFUSED)
        item.content = plan_turn(ask).content
        item.save(update_fields=["content", "updated_at"])
        _changed(chat)
    return item


def queued_withdraw(*, tenant, user, chat_id, queued_id) -> QueuedMessage:
    """Take a queued message back before it starts (or a refused one off the queue's list).
    Raises NotFound, Conflict once started."""
    chat = chat_get(tenant=tenant, user=user, chat_id=chat_id)
    with transaction.atomic():
        item = _waiting_item(chat, queued_id, State.QUEUED, State.REFUSED)
        item.state = State.WITHDRAWN
        item.save(update_fields=["state", "updated_at"])
        _changed(chat)
    return item


def queued_retry(*, tenant, user, chat_id, queued_id) -> QueuedMessage:
    """Queue a refused message again, behind the messages waiting (started at once, once
    committed, when nothing is in progress or waiting). Raises NotFound, Conflict unless it
    was refused, InvalidInput when the chat's queue is full."""
    chat = chat_get(tenant=tenant, user=user, chat_id=chat_id)
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat.pk)
        item = _waiting_item(chat, queued_id, State.REFUSED)
        item.state, item.error, item.position = State.QUEUED, "", _last_place(chat)
        item.save(update_fields=["state", "error", "position", "updated_at"])
        _changed(chat)
        transaction.on_commit(lambda: queue_advance(chat_id=chat.pk))
    item.refresh_from_db()
    return item


def queued_send_now(*, tenant, user, chat_id, queued_id) -> QueuedMessage:
    """Steer: the queued message moves to the head of its chat's queue and the reply in
    progress is stopped at its next token (its partial text kept as the reply, which ends
    `interrupted`); its end starts this message, with that reply in its context. With no
    reply in progress it starts at once. Raises NotFound, Conflict once started."""
    chat = chat_get(tenant=tenant, user=user, chat_id=chat_id)
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat.pk)
        item = _waiting_item(chat, queued_id, State.QUEUED)
        first = QueuedMessage.objects.filter(chat=chat, state=State.QUEUED).aggregate(first=Min("position"))["first"]
        active = GenerationRun.objects.filter(chat=chat, status__in=GenerationRun.ACTIVE).first()
        if first is not None and first < item.position:
            item.position = first - 1
        item.interrupted_run = active
        item.save(update_fields=["position", "interrupted_run", "updated_at"])
        _changed(chat, interrupted=active.pk if active is not None else None)  # its windows label its end
    if active is not None:
        run_cancel(run=active)  # its end (here, or on its worker at the next step) starts the queue
    else:
        queue_advance(chat_id=chat.pk)
    item.refresh_from_db()
    return item


def queue_advance(*, chat_id: int) -> QueuedMessage | None:
    """Start the chat's first queued message if no reply is in progress: its run admitted
    through the door and the message marked started in one transaction, under the chat's
    lock (so never twice). A message the door refuses for good is marked refused (its
    error kept, its owner told) and the next one tried; a refusal that passes within
    PASSING_SECONDS leaves it queued for the sweep, the reason in its `error`. Returns the
    message started, if any."""
    while True:
        with transaction.atomic():
            if not Chat.objects.filter(pk=chat_id).exists():
                return None
            store_turns.chat_lock(chat_id=chat_id)
            head = (QueuedMessage.objects.select_for_update().select_related("tenant", "owner", "chat")
                    .filter(chat_id=chat_id, state=State.QUEUED).order_by("position", "id").first())
            if head is None:
                return None
            try:
                with transaction.atomic():
                    admitted = run_admit(_ask_of(head))
            except ReplyInProgress:
                return None
            except ServiceError as refused:
                if _passes(refused):
                    logger.info("chat %s: queued message %s waits (%s)", chat_id, head.pk, refused.message)
                    if head.error != refused.message:  # the panel says why it waits
                        head.error = refused.message
                        head.save(update_fields=["error", "updated_at"])
                        _changed(head.chat)
                    return None
                head.state, head.error = State.REFUSED, refused.message
                head.save(update_fields=["state", "error", "updated_at"])
                _changed(head.chat)
                continue
            head.state, head.run, head.error = State.STARTED, admitted.run, ""
            head.save(update_fields=["state", "run", "error", "updated_at"])
            _changed(head.chat)
            return head


def queues_sweep() -> int:
    """Start the queues no ending started (its process died between the run's end and the
    queue's advance): chats with a message queued for SWEEP_GRACE and no reply in progress.
    Returns how many messages started."""
    stale = timezone.now() - SWEEP_GRACE
    chat_ids = set(QueuedMessage.objects.filter(state=State.QUEUED, updated_at__lt=stale)
                   .exclude(chat__runs__status__in=GenerationRun.ACTIVE)
                   .values_list("chat_id", flat=True)[:500])
    started = 0
    for chat_id in sorted(chat_ids):
        try:
            started += queue_advance(chat_id=chat_id) is not None
        except Exception:
            logger.exception("sweep: chat %s's queue could not be started; going on with the others", chat_id)
    return started


def _ask_of(item: QueuedMessage) -> Ask:
    req = item.request
    return Ask(caller=Caller(item.tenant, item.owner), where=InChat(item.chat_id), turn=Send(item.content),
               source=req.get("source", GenerationRun.Source.API), model=req.get("model"),
               sampling=req.get("sampling") or {}, tier=req.get("tier", "interactive"),
               idempotency_key=req.get("idempotency_key", ""), from_queue=True)


def _passes(refused: ServiceError) -> bool:
    return isinstance(refused, TRANSIENT) and refused.retry_after is not None and refused.retry_after <= PASSING_SECONDS


def _last_place(chat: Chat) -> int:
    """The position after the chat's waiting messages (under its lock); InvalidInput when full."""
    waiting = QueuedMessage.objects.filter(chat=chat, state=State.QUEUED)
    if waiting.count() >= MAX_QUEUED_PER_CHAT:
        raise InvalidInput(f"at most {MAX_QUEUED_PER_CHAT} messages can wait in a chat; withdraw one or wait "
                           "for them to start", field="queue")
    last = waiting.aggregate(last=Max("position"))["last"]
    return 0 if last is None else last + 1


_LEFT = {State.STARTED: "has started already", State.WITHDRAWN: "was withdrawn",
         State.REFUSED: "was refused when its turn came (retry it first)", State.QUEUED: "is still waiting"}


def _waiting_item(chat: Chat, queued_id, *states: str) -> QueuedMessage:
    """The chat's queued message `queued_id`, locked; NotFound, or Conflict unless in `states`."""
    try:
        item = QueuedMessage.objects.select_for_update().get(chat=chat, pk=int(queued_id))
    except (QueuedMessage.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound("no such queued message in this chat") from None
    if item.state not in states:
        raise Conflict(f"that message {_LEFT[item.state]} ({item.state})", code="queued_message_" + item.state)
    return item


def _changed(chat: Chat, **data) -> None:
    live.chat_event(chat, live.QUEUE_CHANGED, **data)
