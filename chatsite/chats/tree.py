"""Walking a chat's message tree in Postgres: a path up from a message, and the
newest message below one. Each walk is one recursive query: the ORM has none, and a
walk row by row would cost a round trip per message. The chats app's only SQL."""
import json

from django.db import connection

from chatsite.chats.models import Message

_T = Message._meta.db_table

# From a message up to the root (or `limit` messages), newest first.
_UP = f"""
WITH RECURSIVE up(id, parent_id, n) AS (
    SELECT id, parent_id, 1 FROM "{_T}" WHERE id = %s AND chat_id = %s
  UNION ALL
    SELECT m.id, m.parent_id, up.n + 1 FROM "{_T}" m JOIN up ON m.id = up.parent_id WHERE up.n < %s
)
SELECT id FROM up ORDER BY n"""

# The newest message at or below a message (the end of its most recent branch).
_DOWN = f"""
WITH RECURSIVE down(id) AS (
    SELECT id FROM "{_T}" WHERE id = %s AND chat_id = %s
  UNION ALL
    SELECT m.id FROM "{_T}" m JOIN down ON m.parent_id = down.id WHERE m.replaced_by_id IS NULL
)
SELECT max(id) FROM down"""


def path_ids(*, chat_id: int, from_id: int, limit: int) -> list[int]:
    """The ids of `from_id` and up to `limit - 1` messages above it, oldest first."""
    with connection.cursor() as cur:
        cur.execute(_UP, [from_id, chat_id, limit])
        return [row[0] for row in reversed(cur.fetchall())]


def newest_below(*, chat_id: int, message_id: int) -> int | None:
    """The id of the newest message at or below `message_id` (it is a leaf)."""
    with connection.cursor() as cur:
        cur.execute(_DOWN, [message_id, chat_id])
        row = cur.fetchone()
    return row[0] if row else None


def leaf_id(chat) -> int | None:
    """The last message of the chat's chosen path (its newest message for rows
    written before the chat remembered one)."""
    if chat.current_leaf_id is not None:
        return chat.current_leaf_id
    return Message.objects.filter(chat=chat).order_by("-id").values_list("id", flat=True).first()


_UP_ROWS = f"""
WITH RECURSIVE up(id, parent_id, role, content, token_count, tool_calls, tool_call_id, prompt_from_depth, n) AS (
    SELECT id, parent_id, role, content, token_count, tool_calls, tool_call_id, prompt_from_depth, 1
    FROM "{_T}" WHERE id = %s AND chat_id = %s
  UNION ALL
    SELECT m.id, m.parent_id, m.role, m.content, m.token_count, m.tool_calls, m.tool_call_id, m.prompt_from_depth,
           up.n + 1
    FROM "{_T}" m JOIN up ON m.id = up.parent_id WHERE up.n < %s
)
SELECT role, content, token_count, tool_calls, tool_call_id, prompt_from_depth FROM up ORDER BY n"""


def path_rows(*, chat_id: int, from_id: int, limit: int) -> list[tuple[str, str, int, list | None, str, int | None]]:
    """(role, content, token_count, tool_calls, tool_call_id, prompt_from_depth) of
    `from_id` and up to `limit - 1` messages above it, newest first."""
    with connection.cursor() as cur:
        cur.execute(_UP_ROWS, [from_id, chat_id, limit])
        # Django reads jsonb as text (its JSONField parses it); so does this cursor.
        return [(role, content, tokens, json.loads(calls) if isinstance(calls, str) else calls, call_id, since)
                for role, content, tokens, calls, call_id, since in cur.fetchall()]
