"""A reply's token ids (chats.MessageTokens): packed for the finalize that saves them,
and read, in one statement, by the worker whose run builds on that reply, as the
inference.token_prefix.TokenRecord its engine made."""
import sys
from array import array

from chatsite.chats.models import Message, MessageTokens
from chatsite.runs.store.engine import fetch_one, prepared
from inference.token_prefix import TokenRecord

_TOKENS, _MESSAGES = MessageTokens._meta.db_table, Message._meta.db_table


def pack(token_ids) -> bytes:
    """Token ids as little-endian uint32s (the column's format, whatever the machine's)."""
    packed = array("I", token_ids)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def unpack(data: bytes) -> list[int]:
    ids = array("I")
    ids.frombytes(bytes(data))
    if sys.byteorder != "little":
        ids.byteswap()
    return ids.tolist()


# The reply a run builds on: the one it carries on (replaced by the run's own reply), or
# else the reply before the question it answers (a next turn, a regenerate, an edit).
_BUILDS_ON = prepared(
    f'SELECT t.token_ids, t.digest FROM "{_TOKENS}" t WHERE t.message_id = CASE WHEN %(continued)s '
    f'THEN (SELECT m.id FROM "{_MESSAGES}" m WHERE m.replaced_by_id = %(reply)s LIMIT 1) '
    f'ELSE (SELECT m.parent_id FROM "{_MESSAGES}" m WHERE m.id = %(asked)s) END')


def tokens_builds_on(*, asked_id: int, reply_id: int, continued: bool) -> TokenRecord | None:
    """The stored ids of the reply a run builds on (`continued`: the reply it carries on,
    else the one before its question `asked_id`); None when that reply has none (written
    before they were kept, failed, or the first turn)."""
    row = fetch_one(_BUILDS_ON, {"asked": asked_id, "reply": reply_id, "continued": continued})
    return None if row is None else TokenRecord(unpack(row[0]), row[1])
