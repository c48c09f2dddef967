"""The queue's rows, as the queue's services share them: a message as the door's Ask, a
repeat found by its Idempotency-Key, a new message's place, a waiting message by id, and
the chat's windows told of a change (chatsite.runs.services.queued)."""
from dataclasses import dataclass

from django.db.models import Max, OuterRef

from chatsite.chats import live
from chatsite.chats.models import Chat, QueuedMessage
from chatsite.errors import Conflict, InvalidInput, NotFound
from chatsite.runs.admission import Ask, Caller, InChat, Send, idempotency
from chatsite.runs.models import GenerationRun
from chatsite.tenancy.selectors import member_active

MAX_QUEUED_PER_CHAT = 20
State = QueuedMessage.State


def ask_of(item: QueuedMessage) -> Ask:
    req = item.request
    return Ask(caller=Caller(item.tenant, item.owner), where=InChat(item.chat_id), turn=Send(item.content),
               source=req.get("source", GenerationRun.Source.API), model=req.get("model"),
               sampling=req.get("sampling") or {}, tier=req.get("tier", "interactive"),
               idempotency_key=req.get("idempotency_key", ""), from_queue=True)


@dataclass(frozen=True, slots=True)
class Head:
    item: QueuedMessage  # locked, with its tenant, owner and chat
    sender_member: bool  # its sender still belongs to its tenant, both active


def queue_head(*, chat_id: int) -> Head | None:
    """The chat's first waiting message, locked (its row only: a lock on its tenant's or
    owner's row would hold up every insert that refers to them), with whether its sender
    is still a member, in one query; None when none waits."""
    item = (QueuedMessage.objects.select_for_update(of=("self",)).select_related("tenant", "owner", "chat")
            .annotate(sender_member=member_active(tenant=OuterRef("tenant_id"), user=OuterRef("owner_id")))
            .filter(chat_id=chat_id, state=State.QUEUED).order_by("position", "id").first())
    return None if item is None else Head(item, item.sender_member)


def queued_earlier(ask: Ask, key: str, asked: str) -> QueuedMessage | None:
    """The owner's message queued with this key, if it asked for the same (its text as it
    stands: an edit makes it another request); Conflict if it asked for something else."""
    caller = ask.caller
    item = (QueuedMessage.objects.select_related("tenant", "owner")
            .filter(tenant=caller.tenant, owner=caller.user, request__idempotency_key=key).order_by("id").first())
    if item is not None:
        earlier = ask_of(item)
        idempotency.refuse_unless_same(source=earlier.source, digest=idempotency.ask_digest(earlier), ask=ask,
                                       asked=asked)
    return item


def last_place(chat: Chat) -> int:
    """The position after the chat's waiting messages (under its lock); InvalidInput when full."""
    waiting = QueuedMessage.objects.filter(chat=chat, state=State.QUEUED)
    if waiting.count() >= MAX_QUEUED_PER_CHAT:
        raise InvalidInput(f"at most {MAX_QUEUED_PER_CHAT} messages can wait in a chat; withdraw one or wait "
                           "for them to start", field="queue")
    last = waiting.aggregate(last=Max("position"))["last"]
    return 0 if last is None else last + 1


_LEFT = {State.STARTED: "has started already", State.WITHDRAWN: "was withdrawn",
         State.REFUSED: "was refused when its turn came (retry it first)", State.QUEUED: "is still waiting"}


def waiting_item(chat: Chat | int, queued_id, *states: str, lock: bool = True,
                 with_chat: bool = False) -> QueuedMessage:
    """The chat's (or chat id's) queued message `queued_id`, locked (unless not `lock`), its
    chat read along if `with_chat`; NotFound, or Conflict unless in `states`."""
    items = QueuedMessage.objects.select_for_update(of=("self",)) if lock else QueuedMessage.objects
    if with_chat:
        items = items.select_related("chat")
    try:
        item = items.get(chat=chat, pk=int(queued_id))
    except (QueuedMessage.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound("no such queued message in this chat") from None
    if item.state not in states:
        raise Conflict(f"that message {_LEFT[item.state]} ({item.state})", code="queued_message_" + item.state)
    return item


def changed(chat: Chat, **data) -> None:
    live.chat_event(chat, live.QUEUE_CHANGED, **data)
