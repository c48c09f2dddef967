"""Changes to a chat that must wait for its reply in progress: deleting it, and choosing
another version of a message (the next prompt follows the chosen path). Here, with the
runs, because only the runs know whether a reply is being generated."""
from django.db import transaction

from chatsite.chats import live, tree
from chatsite.chats.models import Chat, Message
from chatsite.errors import Conflict, InvalidInput
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.finalize import run_finalize_if_ended


def _generating(chat: Chat) -> bool:
    """Whether a reply is being generated in the chat. A run whose stream has ended but whose
    worker has not saved it yet is saved here first, as the door does: a client acts on a
    reply's end as soon as it reads it."""
    active = chat.runs.filter(status__in=GenerationRun.ACTIVE).values_list("pk", flat=True)
    return any(not run_finalize_if_ended(run_id=run_id) for run_id in active)


def chat_delete(*, chat: Chat) -> None:
    """Delete a chat and its messages; refused while a reply is being generated."""
    if _generating(chat):
        raise Conflict("a reply is still being generated in this chat; stop it first")
    live.chat_event(chat, live.CHAT_DELETED)
    chat.delete()


def message_select(*, chat: Chat, message: Message) -> int:
    """Make `message` (a version of its turn) part of the chosen path, down to the
    newest message below it; the next prompt follows that path. Returns the new
    leaf's id. Refused (Conflict) while a reply is being generated in the chat."""
    if message.replaced_by_id is not None:
        raise InvalidInput("this reply was continued; choose the continued one", field="message")
    with transaction.atomic():
        locked = Chat.objects.select_for_update().get(pk=chat.pk)
        if _generating(chat):
            raise Conflict("a reply is still being generated in this chat; wait for it or stop it first")
        leaf = tree.newest_below(chat_id=chat.pk, message_id=message.pk)
        locked.current_leaf_id = leaf
        locked.save(update_fields=["current_leaf"])  # choosing a version is not a change to list the chat by
        chat.current_leaf_id = leaf
        live.chat_event(chat, live.PATH_CHANGED, anchor=message.parent_id, leaf=leaf)
    return leaf
