"""Where the conversation's token ids meet: read from Postgres for a run's prompt, made
from the engine's output for its reply's record (inference.token_prefix does the rest)."""
import logging

from django.db import DatabaseError

from chatsite.runs.models import GenerationRun
from chatsite.runs.store import tokens as store
from inference.token_prefix import TokenRecord

log = logging.getLogger(__name__)


def known_for(run: GenerationRun, *, continued: bool) -> TokenRecord | None:
    """The record of the reply `run` builds on (`continued`: the reply it carries on),
    or None: none kept, or Postgres could not say (the prompt is then tokenized whole,
    which is always right, only slower)."""
    try:
        stored = store.tokens_builds_on(asked_id=run.user_message_id, reply_id=run.assistant_message_id,
                                        continued=continued)
    except DatabaseError:
        log.warning("run %s: could not read the stored token ids; tokenizing its prompt whole", run.pk,
                    exc_info=True)
        return None
    return None if stored is None else TokenRecord(stored.token_ids, stored.digest)


def to_keep(host, plan, output_ids) -> store.StoredTokens | None:
    """What the run's finalize keeps of its reply's ids: the prompt `plan` the engine was
    sent and the `output_ids` it generated; None for a run with nothing to keep (no
    output ids: it failed, was cancelled or handed back; a raw prompt)."""
    if not output_ids:
        return None
    made = host.token_record(plan, list(output_ids))
    return None if made is None else store.StoredTokens(made.token_ids, made.digest)
