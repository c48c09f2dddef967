"""A turn's writes, in admission's transaction: the chat locked (or made, with the
history a /v1 call sends), its path's end read, the question and its replies written,
the runs written with the chat's new path end along. Each is one round trip."""
from dataclasses import dataclass

from django.db import connection

from chatsite.chats.models import Chat, Message, QueuedMessage
from chatsite.errors import NotFound
from chatsite.runs.models import GenerationRun
from chatsite.runs.store.engine import Insert, fetch_one, prepared, sql_in


_CHATS, _MESSAGES, _RUNS = Chat._meta.db_table, Message._meta.db_table, GenerationRun._meta.db_table
_QUEUED = QueuedMessage._meta.db_table
_INSERT_CHAT, _INSERT_MESSAGES, _INSERT_RUNS = Insert(Chat), Insert(Message), Insert(GenerationRun)


@dataclass(frozen=True, slots=True)
class ChatLock:
    leaf_id: int | None  # the end of the chosen path, as the chat remembers it
    title: str
    system_prompt: str
    listed: bool


@dataclass(frozen=True, slots=True)
class PathEnd:
    active_run_id: int | None  # a reply in progress in the chat
    leaf_id: int | None  # the chosen path's last message (None: an empty chat)
    leaf_depth: int | None
    branched: bool  # that message has replies or other turns after it already
    queue_waiting: bool  # messages wait in the chat's queue (chats.QueuedMessage)


_LOCK_CHAT = prepared(
    f'SELECT current_leaf_id, title, system_prompt, listed FROM "{_CHATS}" WHERE id = %s FOR UPDATE')
# The reply in progress, if any; the chosen path's end (the newest message for chats written
# before they remembered one) and its depth; whether it has messages after it; whether
# messages wait in the chat's queue. A statement of its own after the lock, so that it sees
# what a turn that held the lock before committed.
_PATH_END = (f'WITH leaf AS (SELECT COALESCE(%s, (SELECT max(id) FROM "{_MESSAGES}" WHERE chat_id = %s)) AS id) '
             f'SELECT (SELECT id FROM "{_RUNS}" WHERE chat_id = %s AND status IN {sql_in(GenerationRun.ACTIVE)} LIMIT 1), '
             f'leaf.id, (SELECT depth FROM "{_MESSAGES}" m WHERE m.id = leaf.id), '
             f'EXISTS (SELECT 1 FROM "{_MESSAGES}" c WHERE c.parent_id = leaf.id), '
             f"EXISTS (SELECT 1 FROM \"{_QUEUED}\" q WHERE q.chat_id = %s AND q.state = 'queued') FROM leaf")
_SAVE_CHAT = (f'UPDATE "{_CHATS}" SET title = %s, current_leaf_id = %s, updated_at = %s, system_prompt = %s '
              f'WHERE id = %s')


def chat_lock(*, chat_id: int) -> ChatLock:
    """Lock the chat's row until the transaction ends (one turn at a time) and read what
    a turn changes of it. Raises NotFound for a chat that is not there (deleted meanwhile)."""
    row = fetch_one(_LOCK_CHAT, [chat_id])
    if row is None:
        raise NotFound("no such chat")
    return ChatLock(*row)


def path_end(*, chat_id: int, leaf_id: int | None) -> PathEnd:
    """The chat's reply in progress, the end of its chosen path and whether messages wait in
    its queue (under its lock)."""
    return PathEnd(*fetch_one(_PATH_END, [leaf_id, chat_id, chat_id, chat_id]))


def chat_insert(*, chat: Chat) -> Chat:
    """Write a new chat (its current_leaf may name a message written later in the
    transaction: the foreign key is checked at commit)."""
    _INSERT_CHAT.save(chat)
    return chat


def message_ids(*, count: int) -> list[int]:
    """`count` new message ids, so that a chain can name its parents before it is written."""
    with connection.cursor() as cur:
        cur.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                    [_MESSAGES, count])
        return [row[0] for row in cur.fetchall()]


def chain_insert(*, messages: list[Message]) -> None:
    """Write a chain of messages whose ids and parents are set already (message_ids)."""
    Message.objects.bulk_create(messages)


def turn_insert(*, asked: Message, replies: list[Message]) -> None:
    """Write a turn's messages: a new question and its replies in one statement, or
    (`asked` saved already: a regenerate, a continue) the replies alone."""
    if asked.pk is None:
        _INSERT_MESSAGES.save_with_children(asked, replies, link="parent")
    else:
        _INSERT_MESSAGES.save(*replies)


def has_replies(*, message_id: int) -> bool:
    return Message.objects.filter(parent_id=message_id).exists()


def replace_reply(*, message_id: int, by_id: int) -> None:
    """A continued reply is replaced by the one that carries it on."""
    Message.objects.filter(pk=message_id, replaced_by__isnull=True).update(replaced_by_id=by_id)


def runs_insert(*, runs: list[GenerationRun], chat: Chat) -> None:
    """Write a turn's runs (the first, with the chat's new path end, title, update time
    and system prompt saved along, in one round trip; the others naming the first)."""
    _INSERT_RUNS.save(runs[0], along=(_SAVE_CHAT, [chat.title, chat.current_leaf_id, chat.updated_at,
                                                   chat.system_prompt, chat.pk]))
    if len(runs) > 1:
        for run in runs[1:]:
            run.choice_of = runs[0]
        _INSERT_RUNS.save(*runs[1:])


def active_runs(*, tenant_id: int) -> int:
    """The tenant's queued and running runs (its concurrency)."""
    return GenerationRun.objects.filter(tenant_id=tenant_id, status__in=GenerationRun.ACTIVE).count()


# The oldest reply in progress of a chat whose queued message waits there, with the chat's
# tenant and owner (checked by the caller): a send now's one read before its stop.
_REPLY_TO_STOP = prepared(
    f'SELECT r.id, r.assistant_message_id, c.tenant_id, c.owner_id FROM "{_RUNS}" r '
    f'JOIN "{_CHATS}" c ON c.id = r.chat_id WHERE r.chat_id = %s AND r.status IN {sql_in(GenerationRun.ACTIVE)} '
    f'AND EXISTS (SELECT 1 FROM "{_QUEUED}" q WHERE q.chat_id = r.chat_id AND q.id = %s '
    f"AND q.state = '{QueuedMessage.State.QUEUED}') ORDER BY r.id LIMIT 1")


def reply_to_stop(*, chat_id: int, queued_id: int) -> tuple[int, int, int, int] | None:
    """(run id, reply message id, tenant id, owner id) of the oldest reply in progress in
    chat `chat_id` while its queued message `queued_id` waits there; None otherwise."""
    return fetch_one(_REPLY_TO_STOP, [chat_id, queued_id])
