"""The claim's compare-and-set: a run moves to `running` for a new attempt, once; and, in
the same round trip, the token ids its prompt may start with (chatsite.runs.store.tokens)."""
from dataclasses import dataclass
from datetime import datetime

from chatsite.chats.models import Message, MessageTokens
from chatsite.runs.models import GenerationRun
from chatsite.runs.store.engine import Columns, fetch_one, prepared, sql_in
from chatsite.runs.store.tokens import Kept, unpack
from inference.token_prefix import TokenRecord


@dataclass(frozen=True, slots=True)
class ClaimedRun:
    """What a worker generates a run from, as saved, `running` under its new attempt."""

    id: int
    tenant_id: int
    chat_id: int
    assistant_message_id: int
    tier: str
    source: str
    attempt: int
    sampling: dict
    seed: int
    max_tokens: int
    prompt_tokens: int  # admission's estimate
    budget_cap: int | None  # the most tokens it may use, for a tenant with a budget
    prompt_snapshot: list  # the messages its prompt is built from
    raw_prompt: bool  # a text completion's prompt, as it is
    keeps_token_ids: bool  # its reply's ids are kept for the next turn


_RUN = Columns(GenerationRun, "r", only=tuple(ClaimedRun.__slots__))
_TOKENS, _MESSAGES = MessageTokens._meta.db_table, Message._meta.db_table
# One statement (one round trip): a terminal run is left alone. The ids kept with the two
# replies a prompt can start with come along (each a lookup by key; none for a first turn):
# the reply before the run's question (a next turn, a regenerate, an edit) and the reply
# the run's own reply replaces (a continue). The worker knows which its prompt is.
_CLAIM = prepared(
    f'WITH r AS (UPDATE "{GenerationRun._meta.db_table}" r SET status = %s, attempt = attempt + 1, worker = %s, '
    f'started_at = COALESCE(started_at, %s) WHERE id = %s AND status NOT IN {sql_in(GenerationRun.TERMINAL)} '
    f'RETURNING {_RUN.sql}, r.user_message_id) '
    f'SELECT {_RUN.sql}, b.token_ids, b.digest, b.dropped, c.token_ids, c.digest, c.dropped FROM r '
    f'LEFT JOIN "{_TOKENS}" b ON b.message_id = (SELECT m.parent_id FROM "{_MESSAGES}" m '
    f'WHERE m.id = r.user_message_id) '
    f'LEFT JOIN "{_TOKENS}" c ON c.message_id = (SELECT m.id FROM "{_MESSAGES}" m '
    f'WHERE m.replaced_by_id = r.assistant_message_id LIMIT 1)')


@dataclass(frozen=True, slots=True)
class Taken:
    run: ClaimedRun
    kept: Kept  # the ids its prompt may start with


def run_take(*, run_id: int, worker: str, now: datetime) -> Taken | None:
    """The run, now `running` under a new attempt by `worker`, with the ids kept with the
    replies its prompt may start with; None when it is terminal or there is no such run."""
    row = fetch_one(_CLAIM, [GenerationRun.Status.RUNNING, worker, now, run_id])
    if row is None:
        return None
    n = len(_RUN)
    after_ids, after_digest, after_dropped, carried_ids, carried_digest, carried_dropped = row[n:]
    return Taken(ClaimedRun(*_RUN.values(row[:n])), Kept(
        after_question=None if after_ids is None else TokenRecord(unpack(after_ids), after_digest, after_dropped),
        carried_on=None if carried_ids is None else TokenRecord(unpack(carried_ids), carried_digest, carried_dropped)))


def saved_reply(*, run_id: int) -> tuple[str, TokenRecord | None] | None:
    """The reply of a run as saved, and the ids kept with it (None: none kept); None while
    the run is not saved (not terminal): what a steered run's prompt waits for (workers.steered)."""
    row = (GenerationRun.objects.filter(pk=run_id, status__in=GenerationRun.TERMINAL)
           .values_list("assistant_message__content", "assistant_message__tokens__token_ids",
                        "assistant_message__tokens__digest", "assistant_message__tokens__dropped").first())
    if row is None:
        return None
    content, ids, digest, dropped = row
    return content, None if ids is None else TokenRecord(unpack(ids), digest, dropped)


def snapshot_settled(*, run_id: int, snapshot: list) -> None:
    """A steered run's snapshot as its worker filled it in (workers.steered): the record
    says what its prompt was built from."""
    GenerationRun.objects.filter(pk=run_id).update(prompt_snapshot=snapshot)
