"""A steered run's prompt made whole: a queued message sent now is admitted while the reply
it stops is still being written (chatsite.runs.services.queued.send_now), its snapshot naming
that reply's run (PENDING_REPLY) in the reply's place. Before the prompt is built, the
worker waits for that reply to be saved and puts its saved text, and the ids kept with it,
in that place: the steered run starts as soon as the stop is saved, not a second admission later.

The wait is bounded. The reply's own worker holds it (this one, mostly: the steered run is
routed where the chat's prefix is): its save is waited for here. Another's: the stop written,
then saved here if its worker has not yet. A reply whose worker died or stalled is ended here
once its lease lapses, as a Stop ends it (run_cancel). A reply still held by a live attempt
past the bound hands the steered run back to its pool's queue, to wait again."""
import dataclasses
import logging
import time

from django.conf import settings

from chatsite.runs.admission.ask import PENDING_REPLY
from chatsite.runs.models import GenerationRun
from chatsite.runs.services import Claim, run_cancel
from chatsite.runs.services.finalize import run_finalize_if_ended
from chatsite.runs.store.claim import saved_reply
from chatsite.runs.stream import log as stream_log
from workers.db_retry import with_db_retry

log = logging.getLogger(__name__)

MARGIN_SECONDS = 2.0  # past the stopped reply's lease: a dead worker's run can then be ended here


def pending_run(claim: Claim) -> int | None:
    """The run whose reply the claimed run's prompt waits for, if any: it stands right
    before the message sent now, the snapshot's last (admission.write.snapshot)."""
    messages = claim.run.prompt_snapshot
    return messages[-2].get(PENDING_REPLY) if len(messages) > 1 else None


def settle(rt, claim: Claim, stopped: int) -> Claim | None:
    """The claim with the stopped reply's saved text in its snapshot (left out if it has
    none, as admission leaves an empty reply out) and the ids kept with it as the ids its
    prompt starts with; None when that reply is not saved within the bound (hand it back)."""
    saved = _wait_saved(rt, stopped, seconds=settings.CHATSITE["RUN_LEASE_SECONDS"] + MARGIN_SECONDS)
    if saved is None:
        log.warning("run %s: the reply it steers from (run %s) is not saved yet; back to the queue",
                    claim.run.id, stopped)
        return None
    text, record = saved
    messages = [({"role": "assistant", "content": text} if PENDING_REPLY in m else m)
                for m in claim.run.prompt_snapshot if PENDING_REPLY not in m or text]
    run = dataclasses.replace(claim.run, prompt_snapshot=messages)
    kept = dataclasses.replace(claim.kept, after_question=record)
    return dataclasses.replace(claim, run=run, kept=kept, cancel_asked=stream_log.cancel_asked(run.id))


def _wait_saved(rt, stopped: int, *, seconds: float):
    deadline = time.monotonic() + seconds
    if not rt.heartbeat.wait_dropped(stopped, timeout=seconds):  # held here: its own save
        return with_db_retry(saved_reply, run_id=stopped)
    saved = with_db_retry(saved_reply, run_id=stopped)
    if saved is not None:
        return saved
    if stream_log.wait_ended(stopped, timeout=max(0.0, deadline - time.monotonic())):
        with_db_retry(run_finalize_if_ended, run_id=stopped)  # its worker's save may not have come yet
    else:  # its worker died or stalled: its lease has lapsed by now, and a Stop ends it here
        with_db_retry(lambda: run_cancel(run=GenerationRun.objects.get(pk=stopped)))
    return with_db_retry(saved_reply, run_id=stopped)
