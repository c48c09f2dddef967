"""A reply's token ids (chats.MessageTokens): packed for the finalize that saves them,
and read with the claim of a run that builds on that reply (chatsite.runs.store.claim),
as the inference.token_prefix.TokenRecord its engine made."""
import sys
from array import array
from dataclasses import dataclass

from inference.token_prefix import TokenRecord


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


@dataclass(frozen=True, slots=True)
class Kept:
    """The ids kept with the replies a run's prompt may start with (read with its claim,
    chatsite.runs.store.claim): None where that reply has none (written before ids were
    kept, failed, or there is no such reply)."""

    after_question: TokenRecord | None  # the reply before the run's question
    carried_on: TokenRecord | None  # the reply the run's own reply carries on (a continue)

    def builds_on(self, *, continued: bool) -> TokenRecord | None:
        """The record the prompt starts with: the reply it carries on (`continued`), else
        the reply before its question (a next turn, a regenerate, an edit)."""
        return self.carried_on if continued else self.after_question

