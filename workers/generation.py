"""One run through this worker's engine: claim, continue from the stream, finalize."""
import logging

from django.db import connection

from chatsite.runs.dispatch import run_dispatch
from chatsite.runs.models import GenerationRun
from chatsite.runs.routing import affinity_pin
from chatsite.runs.services import Claim, run_claim, run_end, run_finalize, run_release
from chatsite.runs.stream import codec, log as stream_log
from inference.prompt import PromptTooLong
from inference.types import GenerationRequest
from workers import stream_writer
from workers.db_retry import with_db_retry
from workers.runtime import Runtime
from workers.stream_writer import ActiveRun

log = logging.getLogger(__name__)

TIER_PRIORITY = {GenerationRun.Tier.INTERACTIVE: 0, GenerationRun.Tier.BATCH: 10}


def generate(rt: Runtime, run_id: int) -> str:
    """Generate (or continue) one run. Returns what happened; does nothing for a run
    that is finished or that another live attempt holds (the task is idempotent)."""
    claim = with_db_retry(run_claim, run_id=run_id, worker=rt.worker_name)
    if claim is None:
        return finish_unclaimed(run_id)
    return generate_claimed(rt, claim)


def finish_unclaimed(run_id: int) -> str:
    """A run this worker could not claim: finalized if its stream ended but its worker
    died before saving it, else skipped (finished, or another live attempt holds it)."""
    if stream_log.has_ended(run_id):
        with_db_retry(run_finalize, run_id=run_id)
        return "finalized"
    return "skipped"


def generate_claimed(rt: Runtime, claim: Claim) -> str:
    """Generate a run this worker has just claimed; releases the claim at the end."""
    run, run_id = claim.run, claim.run.pk
    with rt.heartbeat.leases_lock:
        rt.heartbeat.leases[run_id] = claim.lease_token
    try:
        affinity_pin(chat_id=run.chat_id, worker=rt.worker_name)
        outcome = _generate_claimed(rt, run, claim.lease_token)
    finally:
        with rt.heartbeat.leases_lock:
            rt.heartbeat.leases.pop(run_id, None)
        run_release(run_id=run_id, lease_token=claim.lease_token)
    if outcome == stream_writer.HANDED_BACK:
        # Only now that our lease is gone can another worker claim it; the router
        # sends it to the pool queue (and the fair queue) since this worker is draining.
        run_dispatch(run)
    return outcome


def _generate_claimed(rt: Runtime, run: GenerationRun, lease_token: str) -> str:
    def end(fields: dict, outcome: str) -> str:
        with_db_retry(run_end, run_id=run.pk, lease_token=lease_token, fields=fields)
        return outcome

    reply = stream_log.read(run.pk)  # what earlier attempts already streamed
    if reply.gap is not None:
        return end(codec.error_fields(code=reply.gap.code, message=reply.gap.message), "failed")
    if stream_log.cancel_asked(run.pk):
        return end(codec.done_fields(finish_reason="cancelled", prompt_tokens=0,
                                     completion_tokens=reply.completion_tokens), "cancelled")
    remaining = run.max_tokens - reply.completion_tokens
    if remaining <= 0:
        return end(codec.done_fields(finish_reason="length", prompt_tokens=run.prompt_tokens,
                                     completion_tokens=reply.completion_tokens), "finalized")
    messages, prefix = run.prompt_snapshot, ""
    if messages and messages[-1]["role"] == "assistant":  # a continued reply: carry on from its text
        messages, prefix = messages[:-1], messages[-1]["content"]
    try:
        plan = rt.host.build_prompt(messages, max_prompt_tokens=rt.pool.context_length - remaining,
                                    continuation=prefix + reply.text)
    except PromptTooLong as exc:
        return end(codec.error_fields(code="context_length_exceeded", message=str(exc)), "failed")
    capped = False
    if run.budget_cap is not None:  # the tenant's budget, counted with the real prompt length
        allowed = run.budget_cap - len(plan.token_ids) - reply.completion_tokens
        capped = allowed < remaining
        remaining = min(remaining, allowed)
        if remaining <= 0:
            return end(codec.done_fields(finish_reason="budget", prompt_tokens=len(plan.token_ids),
                                         completion_tokens=reply.completion_tokens), "finalized")
    active = ActiveRun(run_id=run.pk, attempt=run.attempt, request_id=f"run-{run.pk}-{run.attempt}",
                       lease_token=lease_token, next_seq=reply.completion_tokens, budget_capped=capped)
    rt.writer.register(active)
    try:
        rt.host.submit(GenerationRequest(
            request_id=active.request_id, prompt_token_ids=plan.token_ids, max_tokens=remaining,
            temperature=run.sampling.get("temperature", 1.0), top_p=run.sampling.get("top_p", 1.0),
            seed=run.seed, stop=tuple(run.sampling.get("stop", ())),
            priority=TIER_PRIORITY.get(run.tier, 0), ignore_eos=bool(run.sampling.get("ignore_eos", False)),
        ))
        connection.close()  # no idle Postgres connection per waiting run: 32 slots would hold 32
        active.done.wait()
    finally:
        rt.writer.unregister(active)
    if active.outcome == stream_writer.HANDED_BACK:
        log.info("run %s handed back to the queue after %d tokens", run.pk, active.next_seq)
    elif active.outcome == stream_writer.SUPERSEDED:
        log.warning("run %s attempt %s superseded after %d tokens; nothing more written", run.pk, run.attempt,
                    active.next_seq)
    elif active.outcome == stream_writer.WRITE_FAILED:
        raise RuntimeError(f"run {run.pk}: could not write its terminal entry; the sweep will finish it")
    else:
        with_db_retry(run_finalize, run_id=run.pk)
    return active.outcome
