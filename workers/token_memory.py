"""Where the conversation's token ids meet: made from the engine's output for its reply's
record, and held in the prefix index (inference.token_prefix does the rest; a run's prompt
reads the ids it starts with in its claim: chatsite.runs.store.claim)."""
from chatsite.runs import prefix_index
from chatsite.runs.routing import affinity_enabled, affinity_pin
from chatsite.runs.store.claim import ClaimedRun
from inference.engine_config import block_size
from inference.token_prefix import TokenRecord


def to_keep(host, plan, output_ids) -> TokenRecord | None:
    """What the run's finalize keeps of its reply's ids: the prompt `plan` the engine was
    sent and the `output_ids` it generated (a stopped run's: up to its stop); None for a run
    with nothing to keep (no output ids: it failed or was handed back; a raw prompt)."""
    if not output_ids:
        return None
    return host.token_record(plan, list(output_ids))


def held_here(pipe, *, worker: str, pool, run: ClaimedRun, plan, kept: TokenRecord | None) -> None:
    """Add to `pipe` (the finalize's round trip) what this worker's engine holds now that
    `run` ended: its chat (the pin) and, when its reply's ids are `kept`, those ids, the
    first `plan.from_ids` of which were the record its prompt started with (the prefix index)."""
    affinity_pin(chat_id=run.chat_id, worker=worker, redis=pipe)
    if kept is not None and affinity_enabled():
        prefix_index.hold(pipe, pool=pool.name, worker=worker, token_ids=kept.token_ids,
                          block=block_size(pool.engine_args), reply_id=run.assistant_message_id,
                          built_on=plan.from_ids)
