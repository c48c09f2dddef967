"""Messages sent while a reply is being written: queued in the chat, started one at a
time, in order, through the one door when the reply in progress ends (completed,
stopped, failed or swept: run_finalize's `queue_waiting` calls queue_start_next), or sent
now (the reply in progress stops at its next token and this message runs next, after it).

A message is checked when queued as the door checks a turn (its Idempotency-Key, its
plan, the tenant's rate: counted then, once), and again, but for the rate, when its turn
comes: by then its sender may have lost access (the credential that queued it, kept on
the row, revoked), or its pool its workers. One its turn
found refused for good (a budget used up) stays in the queue's list, refused, with the
reason, until its owner retries or withdraws it; a refusal that passes within minutes (the
tenant's rate, a busy or restarting pool) leaves it waiting, the reason kept, until the
refusal's retry time (`not_before`).

The queue is rows in Postgres (chats.QueuedMessage): it survives a reload, a web
restart and a worker crash. A message starts under its chat's lock, in the transaction
that admits its run, so none starts twice; a queue whose advance was lost (a process
that died after its run ended) is started again by the sweep (queues_sweep)."""
import logging
from dataclasses import replace
from datetime import timedelta

from django.db import transaction
from django.db.models import Exists, Max, Min, OuterRef
from django.utils import timezone

from chatsite.chats import live
from chatsite.chats.models import Chat, QueuedMessage
from chatsite.chats.selectors import chat_get
from chatsite.errors import Conflict, InvalidInput, ModelUnavailable, NotFound, Overloaded, RateLimited, ServiceError
from chatsite.runs.admission import (Admitted, Ask, Caller, InChat, QueueWaiting, ReplyInProgress, Send, idempotency,
                                     run_admit)
from chatsite.runs.admission.door import run_count_rate
from chatsite.runs.admission.plan import plan as plan_turn
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.cancel import run_cancel
from chatsite.runs.store import turns as store_turns
from chatsite.tenancy import revocation
from chatsite.tenancy.revocation import Grant, grant_revoked
from chatsite.tenancy.selectors import member_active

logger = logging.getLogger(__name__)

MAX_QUEUED_PER_CHAT = 20
# Refusals that may pass (the tenant's rate or runs at once, a busy or restarting pool): the
# message waits on if the refusal says it passes within PASSING_SECONDS (a budget used up
# says when its period renews: hours, mostly), and is refused otherwise. The sweep tries a
# waiting one again from its retry time (`not_before`).
TRANSIENT = (RateLimited, Overloaded, ModelUnavailable)
PASSING_SECONDS = 300
SWEEP_GRACE = timedelta(seconds=5)  # a queue its run's end is starting right now is left to it
SWEEP_CHATS = 500  # chats a sweep starts at most, the longest untouched first
State = QueuedMessage.State
ACCESS_ENDED = "its sender no longer has access to this chat"
CREDENTIAL_ENDED = {  # why a message is refused when the credential that queued it ended since
    revocation.KEY: "the API key it was sent with was revoked after it was queued",
    revocation.SESSION: "the session it was sent from was signed out after it was queued",
    revocation.SESSIONS: "its sender's password was changed after it was queued (which signs every session out)",
}


def message_send_or_queue(*, ask: Ask, queue: bool = True) -> Admitted | QueuedMessage:
    """A new message sent to a chat: admitted at once (as run_admit does) when the chat has
    no reply in progress and nothing queued; queued behind the messages waiting when it has
    some (the door decides, under the chat's lock: a message never overtakes the queue); and,
    with `queue` (the queue flag), queued too while a reply is in progress. Raises what
    run_admit raises for the message itself (400, 404, 429, 503; ReplyInProgress, 409,
    without `queue`), and InvalidInput when the chat's queue is full. A repeat of a message
    still queued (its Idempotency-Key) gets it back before the door counts the tenant's rate."""
    key = idempotency.check_key(ask.idempotency_key)
    if key and (earlier := _queued_earlier(ask, key, idempotency.ask_digest(ask))) is not None \
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
    if key and (earlier := _queued_earlier(ask, key, asked)) is not None:
        return earlier
    if not counted:
        run_count_rate(ask)
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat.pk)
        if key and (earlier := _queued_earlier(ask, key, asked)) is not None:  # a repeat that committed first
            return earlier
        item = QueuedMessage.objects.create(
            chat=chat, tenant=ask.caller.tenant, owner=ask.caller.user, content=plan.content,
            position=_last_place(chat),
            request={"sampling": ask.sampling, "model": ask.model, "tier": ask.tier, "source": ask.source,
                     "idempotency_key": key},
            credential=ask.caller.credential, granted_at=timezone.now())
        _changed(chat)
        transaction.on_commit(lambda: queue_advance(chat_id=chat.pk))
    item.refresh_from_db()
    return item


def queued_edit(*, tenant, user, chat_id, queued_id, content) -> QueuedMessage:
    """A queued (or refused) message's new text, checked as the message it is (its own pool
    and settings); a refused one stays refused until retried. Raises NotFound, Conflict
    once it has started or was withdrawn, InvalidInput for empty or overlong text."""
    chat = chat_get(tenant=tenant, user=user, chat_id=chat_id)
    asked = _ask_of(_waiting_item(chat, queued_id, State.QUEUED, State.REFUSED, lock=False))
    text = plan_turn(replace(asked, turn=Send(content))).content  # as the message it is; before any lock
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat.pk)  # the queue's writers change it one at a time, as add and advance do
        item = _waiting_item(chat, queued_id, State.QUEUED, State.REFUSED)
        item.content = text
        item.save(update_fields=["content", "updated_at"])
        _changed(chat)
    return item


def queued_withdraw(*, tenant, user, chat_id, queued_id) -> QueuedMessage:
    """Take a queued message back before it starts (or a refused one off the queue's list).
    Raises NotFound, Conflict once started."""
    chat = chat_get(tenant=tenant, user=user, chat_id=chat_id)
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat.pk)
        item = _waiting_item(chat, queued_id, State.QUEUED, State.REFUSED)
        item.state = State.WITHDRAWN
        item.save(update_fields=["state", "updated_at"])
        _changed(chat)
    return item


def queued_retry(*, tenant, user, chat_id, queued_id, credential: str = "") -> QueuedMessage:
    """Queue a refused message again, behind the messages waiting (started at once, once
    committed, when nothing is in progress or waiting), under the retrying request's
    `credential` from now on. Raises NotFound, Conflict unless it was refused, InvalidInput
    when the chat's queue is full."""
    chat = chat_get(tenant=tenant, user=user, chat_id=chat_id)
    with transaction.atomic():
        store_turns.chat_lock(chat_id=chat.pk)
        item = _waiting_item(chat, queued_id, State.REFUSED)
        item.state, item.error, item.position, item.not_before = State.QUEUED, "", _last_place(chat), None
        item.credential, item.granted_at = credential, timezone.now()
        item.save(update_fields=["state", "error", "position", "not_before", "credential", "granted_at",
                                 "updated_at"])
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
    lock (so never twice). A message the door refuses for good, or whose sender lost
    access to the chat or whose credential ended since it was queued (a key revoked, a
    session signed out), is marked refused (its error kept, its owner told) and the next one
    tried; a refusal that passes within PASSING_SECONDS leaves it queued, the reason in its
    `error`, for the sweep to try again from its `not_before`. Returns the message started,
    if any."""
    while True:
        with transaction.atomic():
            try:
                store_turns.chat_lock(chat_id=chat_id)
            except NotFound:  # the chat was deleted, its queue with it
                return None
            head = (QueuedMessage.objects.select_for_update().select_related("tenant", "owner", "chat")
                    .filter(chat_id=chat_id, state=State.QUEUED).order_by("position", "id").first())
            if head is None:
                return None
            if (ended := _access_ended(head)) is not None:
                _refuse(head, ended)
                continue
            try:
                with transaction.atomic():
                    admitted = run_admit(_ask_of(head))
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
                        _changed(head.chat)
                    return None
                _refuse(head, refused.message)
                continue
            head.state, head.run, head.error = State.STARTED, admitted.run, ""
            head.save(update_fields=["state", "run", "error", "updated_at"])
            _changed(head.chat)
            return head


def queue_start_next(sender=None, *, chat_id: int, **signal) -> None:
    """A run of the chat ended with messages queued (finalize's `queue_waiting`): start the
    next. A failure is logged: the sweep starts a queue left waiting."""
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


def _access_ended(item: QueuedMessage) -> str | None:
    """Why its sender may no longer send it, checked as the door checks a live request's
    credential: membership, and the credential that queued it (a key revoked, a session
    signed out, a password changed since; chatsite.tenancy.revocation). None: it may go."""
    if not member_active(tenant=item.tenant, user=item.owner):
        return ACCESS_ENDED
    if item.granted_at is None:  # queued before its credential was kept
        return None
    grant = Grant(run_id=0, chat_id=item.chat_id, tenant_id=item.tenant_id, user_id=item.owner_id,
                  credential=item.credential, since=item.granted_at.timestamp())
    if grant.expired():  # older than the revocations kept: none can be ruled out
        return "it waited longer than its sender's access is kept without a check; retry it to send it"
    kind = grant_revoked(grant)
    return None if kind is None else CREDENTIAL_ENDED.get(kind, ACCESS_ENDED)


def _refuse(item: QueuedMessage, why: str) -> None:
    item.state, item.error = State.REFUSED, why
    item.save(update_fields=["state", "error", "updated_at"])
    _changed(item.chat)


def _ask_of(item: QueuedMessage) -> Ask:
    req = item.request
    return Ask(caller=Caller(item.tenant, item.owner), where=InChat(item.chat_id), turn=Send(item.content),
               source=req.get("source", GenerationRun.Source.API), model=req.get("model"),
               sampling=req.get("sampling") or {}, tier=req.get("tier", "interactive"),
               idempotency_key=req.get("idempotency_key", ""), from_queue=True)


def _queued_earlier(ask: Ask, key: str, asked: str) -> QueuedMessage | None:
    """The owner's message queued with this key, if it asked for the same (its text as it
    stands: an edit makes it another request); Conflict if it asked for something else."""
    caller = ask.caller
    item = (QueuedMessage.objects.select_related("tenant", "owner")
            .filter(tenant=caller.tenant, owner=caller.user, request__idempotency_key=key).order_by("id").first())
    if item is not None:
        earlier = _ask_of(item)
        idempotency.refuse_unless_same(source=earlier.source, digest=idempotency.ask_digest(earlier), ask=ask,
                                       asked=asked)
    return item


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


def _waiting_item(chat: Chat, queued_id, *states: str, lock: bool = True) -> QueuedMessage:
    """The chat's queued message `queued_id`, locked (unless not `lock`); NotFound, or
    Conflict unless in `states`."""
    items = QueuedMessage.objects.select_for_update() if lock else QueuedMessage.objects
    try:
        item = items.get(chat=chat, pk=int(queued_id))
    except (QueuedMessage.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound("no such queued message in this chat") from None
    if item.state not in states:
        raise Conflict(f"that message {_LEFT[item.state]} ({item.state})", code="queued_message_" + item.state)
    return item


def _changed(chat: Chat, **data) -> None:
    live.chat_event(chat, live.QUEUE_CHANGED, **data)
