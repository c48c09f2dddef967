"""Reads for chats and messages, always scoped to the tenant and owner asking."""
from chatsite.chats.models import Chat, Message
from chatsite.errors import NotFound


def chats_for(*, tenant, user):
    return Chat.objects.filter(tenant=tenant, owner=user).select_related("pool")


def chat_get(*, tenant, user, chat_id) -> Chat:
    """The chat, or NotFound (404) when it is not this user's in this tenant."""
    try:
        chat = chats_for(tenant=tenant, user=user).get(pk=int(chat_id))
    except (Chat.DoesNotExist, ValueError, TypeError):
        raise NotFound("no such chat") from None
    chat.tenant = tenant  # the caller's, already loaded: services reading chat.tenant need no query
    return chat


def messages_for(*, chat: Chat):
    return Message.objects.filter(chat=chat).select_related("run", "run__pool").order_by("id")
