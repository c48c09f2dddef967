"""One run through this worker's engine: claim, continue from the stream, finalize."""
import json
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from chatsite import stage_trace
from chatsite.runs.dispatch import run_requeue
from chatsite.runs.models import GenerationRun
from chatsite.runs.schema_limits import CONSTRAINT_REFUSED
from chatsite.runs.services import Claim, run_claim, run_end, run_finalize, run_release
from chatsite.runs.services.sweep import run_reconverge
from chatsite.runs.store.claim import ClaimedRun, snapshot_settled
from chatsite.runs.store.tokens import Kept
from chatsite.runs.stream import codec, log as stream_log
from inference.prompt import PromptTooLong
from inference.types import SAMPLING_DEFAULTS, GenerationRequest
from workers import steered, stream_writer, token_memory
from workers.db_retry import with_db_retry
from workers.runtime import Runtime
from workers.stream_writer import ActiveRun

log = logging.getLogger(__name__)

TIER_PRIORITY = {GenerationRun.Tier.INTERACTIVE: 0, GenerationRun.Tier.BATCH: 10}
# What _generate_claimed returns once this attempt's terminal entry is written (the
# writer's end, or run_end's): the append that wrote it marked the lease ended.
ENDED_HERE = frozenset({stream_writer.FINISHED, stream_writer.FAILED, "cancelled", "finalized"})


def generate(rt: Runtime, run_id: int) -> str:
    """Generate (or continue) one run. Returns what happened; does nothing for a run
    that is finished or that another live attempt holds (the task is idempotent)."""
    claim, since = claim_timed(rt, run_id)
    if claim is None:
        return finish_unclaimed(run_id)
    return generate_claimed(rt, claim, since=since)


def claim_timed(rt: Runtime, run_id: int) -> tuple[Claim | None, float]:
    """run_claim (retried while Postgres is away), and a monotonic time no later than
    the lease it took was set: the heartbeat's lease watch counts from it."""
    tried_at = 0.0

    def claim_run():
        nonlocal tried_at
        tried_at = time.monotonic()  # the lease this try takes starts no earlier
        return run_claim(run_id=run_id, worker=rt.worker_name)

    return with_db_retry(claim_run), tried_at


def finish_unclaimed(run_id: int) -> str:
    """A run this worker could not claim: finalized if its stream ended but its worker
    died before saving it, else skipped (finished, or another live attempt holds it)."""
    if stream_log.has_ended(run_id):
        with_db_retry(run_finalize, run_id=run_id)
        return "finalized"
    return "skipped"


def generate_claimed(rt: Runtime, claim: Claim, *, since: float) -> str:
    """Generate a run this worker has just claimed (its lease taken no earlier than
    `since`); releases the claim at the end."""
    run, run_id = claim.run, claim.run.id
    stage_trace.mark("worker.claimed", run_id)
    rt.heartbeat.hold(run_id, claim.lease_token, since=since)
    outcome = None
    try:
        outcome = _generate_claimed(rt, claim)
    finally:
        rt.heartbeat.drop(run_id)
        if outcome not in ENDED_HERE:  # else the lease reads ended:<token>, which a release leaves as it is
            run_release(run_id=run_id, lease_token=claim.lease_token)
    if outcome == stream_writer.HANDED_BACK:
        # Only now that our lease is gone can another worker claim it: back to its pool's
        # fair queue (this worker's pool: a worker takes only its own pool's runs).
        _requeue(rt, run)
    elif outcome == stream_writer.SUPERSEDED:  # our lease given up above: does another attempt hold the run?
        _reconverge(run_id)
    return outcome


def engine_request(run: ClaimedRun, *, request_id: str, prompt_token_ids: list[int],
                   max_tokens: int, carried_ids: tuple[int, ...] = ()) -> GenerationRequest:
    """The engine request for `run`: its saved sampling (runs admitted before a knob
    existed lack its key and get the engine's default); `carried_ids`, a constrained
    reply's tokens earlier attempts wrote, which its grammar reads first."""
    s = run.sampling
    fmt = s.get("response_format") or {}
    schema = fmt.get("schema") if fmt.get("type") == "json_schema" else None
    allowed, guide = s.get("allowed_token_ids"), s.get("guide")
    return GenerationRequest(
        request_id=request_id, prompt_token_ids=prompt_token_ids, max_tokens=max_tokens,
        **{name: s[name] for name in SAMPLING_DEFAULTS if name in s}, seed=run.seed,
        stop=tuple(s.get("stop", ())), priority=TIER_PRIORITY.get(run.tier, 0),
        ignore_eos=bool(s.get("ignore_eos", False)), json_object=fmt.get("type") == "json_object",
        json_schema=json.dumps(schema) if schema is not None else None, logprobs=s.get("logprobs"),
        min_tokens=min(s.get("min_tokens", 0), max_tokens),  # a continued run has fewer left to write
        logit_bias=tuple((int(k), v) for k, v in (s.get("logit_bias") or {}).items()),
        allowed_token_ids=tuple(allowed) if allowed is not None else None,
        guide=tuple(guide) if guide is not None else None, prompt_logprobs=s.get("prompt_logprobs"),
        token_ids=bool(s.get("return_token_ids")), tokens_as_ids=bool(s.get("return_tokens_as_token_ids")),
        carried_ids=carried_ids,
    )


def _prompt(rt: Runtime, run: ClaimedRun, kept: Kept, *, max_prompt_tokens: int, so_far: str):
    """The run's prompt plan: its snapshot through the chat template (a continued reply
    carries on from its text), or a text completion's prompt as it is; then `so_far`,
    what earlier attempts streamed; `kept`: the ids the claim read for it to start with.
    Raises PromptTooLong."""
    messages, prefix, s = run.prompt_snapshot, "", run.sampling
    if run.raw_prompt:
        return rt.host.build_raw_prompt(messages[-1]["content"], max_prompt_tokens=max_prompt_tokens,
                                        carried=so_far, token_ids=s.get("prompt_token_ids"))
    # A reply that ends the messages is carried on (a continued reply, a /v1 prefill),
    # unless the request asked for a new turn after it (vLLM's add_generation_prompt).
    add_generation_prompt = s.get("add_generation_prompt")
    if messages and messages[-1]["role"] == "assistant" and add_generation_prompt is not True:
        messages, prefix = messages[:-1], messages[-1]["content"]
    tools = (s.get("tools") or {}).get("definitions")  # an OpenAI request's functions
    known = kept.builds_on(continued=bool(prefix))  # none for a first turn: no reply before its question
    return rt.host.build_prompt(messages, max_prompt_tokens=max_prompt_tokens, continuation=prefix, carried=so_far,
                                tools=tools, add_generation_prompt=add_generation_prompt is not False, known=known)


def _details(rt: Runtime, run: ClaimedRun, plan) -> dict:
    """What a run's first token entry says of its prompt beyond the engine's report, and
    whether its entries carry token ids: only for a /v1 run that asked (vLLM's
    return_token_ids, a token-id prompt echoed, prompt log probabilities, usage on
    every chunk)."""
    s = run.sampling
    prompt = plan.token_ids[:len(plan.token_ids) - plan.num_carried_tokens]
    extra = {}
    if s.get("return_token_ids"):
        extra["prompt_ids"] = prompt
    if s.get("echo") and s.get("prompt_token_ids") is not None:
        extra["prompt_text"] = rt.host.decode(s["prompt_token_ids"])
    if s.get("continuous_usage_stats"):  # usage on every chunk, from the first
        extra["prompt_tokens"] = len(prompt)
    asked = s.get("prompt_logprobs") is not None
    if asked and prompt:  # the engine gives no figure for the first token: its text, for an echo
        extra["prompt_first"] = [prompt[0], rt.host.decode(prompt[:1])]
    return {"token_ids": bool(s.get("return_token_ids")), "prompt_logprobs": asked,
            "prompt_extra": extra if extra or asked else None}


def constrained(run: ClaimedRun) -> bool:
    """A reply under a grammar (a response_format, a guide): another attempt carries it on
    only with its grammar advanced over the reply so far (carried_ids)."""
    return bool(run.sampling.get("response_format") or run.sampling.get("guide"))


def _constraint_refused(rt: Runtime, run: ClaimedRun) -> dict | None:
    """The error entry for a run whose JSON Schema the engine cannot take (refused, or
    a grammar that does not compile within the budget), else None: asked here, on the
    run's thread, so that neither the engine's loop nor its other requests wait for it."""
    fmt = run.sampling.get("response_format") or {}
    if fmt.get("type") != "json_schema":
        return None
    problem = rt.host.constraint_problem(json.dumps(fmt["schema"]),
                                         budget_seconds=settings.CHATSITE["CONSTRAINT_COMPILE_SECONDS"])
    if problem is None:
        return None
    what = "the tools' parameters" if run.sampling.get("tools") else "the response_format's JSON Schema"
    return codec.error_fields(code=CONSTRAINT_REFUSED, message=f"{what}: {problem}")


@dataclass(frozen=True)
class _Ready:
    """What a run goes to the engine with: its prompt plan, the tokens it may still
    write, and whether the tenant's budget capped them."""

    plan: object  # inference.prompt's plan
    remaining: int
    capped: bool
    carried_ids: tuple[int, ...] = ()  # a constrained reply's tokens so far, for its grammar


def _carried_ids(rt: Runtime, run: ClaimedRun, plan, so_far: str) -> tuple[int, ...] | None:
    """The ids a constrained reply's grammar reads before the engine goes on (the prompt's
    tail that is the reply so far: inference.carried_grammar), () when there is nothing to
    carry, None when that tail is not exactly the text the client has (a prefill whose last
    token merged with the reply's first): the grammar could not take it up as streamed."""
    if not so_far or not constrained(run):
        return ()
    ids = tuple(plan.token_ids[len(plan.token_ids) - plan.num_carried_tokens:])
    return ids if ids and rt.host.decode(list(ids)) == so_far else None


def _preflight(rt: Runtime, claim: Claim) -> tuple[dict, str] | _Ready:
    """Before the engine: the run's terminal entry and outcome when it ends here (a gap
    in what earlier attempts wrote, a cancel, a schema the engine cannot take, no tokens
    left, a prompt too long, a constrained reply whose text so far its grammar cannot be
    given, the budget spent), else what it goes to the engine with."""
    run, reply = claim.run, claim.so_far  # what earlier attempts streamed
    if reply.gap is not None:
        return codec.error_fields(code=reply.gap.code, message=reply.gap.message), "failed"
    if claim.cancel_asked:
        return codec.done_fields(finish_reason="cancelled", prompt_tokens=0,
                                 completion_tokens=reply.completion_tokens), "cancelled"
    refused = _constraint_refused(rt, run)
    if refused is not None:
        return refused, "failed"
    remaining = run.max_tokens - reply.completion_tokens
    if remaining <= 0:
        return codec.done_fields(finish_reason="length", prompt_tokens=run.prompt_tokens,
                                 completion_tokens=reply.completion_tokens), "finalized"
    try:
        plan = _prompt(rt, run, claim.kept, max_prompt_tokens=rt.pool.context_length - remaining, so_far=reply.text)
    except PromptTooLong as exc:
        return codec.error_fields(code="context_length_exceeded", message=str(exc)), "failed"
    if plan.num_messages_dropped and run.source == GenerationRun.Source.OPENAI:
        # An OpenAI client's conversation reaches the model whole or not at all (the
        # real chat template can take more than admission's estimate).
        return codec.error_fields(code="context_length_exceeded", message=(
            f"the messages are more than the {rt.pool.context_length - remaining} prompt tokens the model has "
            f"room for with a reply of up to {remaining} tokens; shorten them or ask for fewer max_tokens")), "failed"
    carried_ids = _carried_ids(rt, run, plan, reply.text)
    if carried_ids is None:
        # Carried on from a grammar's start, the reply would be a second JSON value after
        # the first's beginning. Say so instead.
        return codec.error_fields(code="structured_output_interrupted", message=(
            "the worker generating this constrained reply stopped part-way, and its text so far cannot be "
            "carried on under its format; send the request again")), "failed"
    # What earlier attempts streamed is in this prompt (the engine carries on from it) but
    # is billed once, as completion: the prompt billed is the rest.
    prompt_tokens = len(plan.token_ids) - plan.num_carried_tokens
    capped = False
    if run.budget_cap is not None:  # the tenant's budget, counted with the real prompt length
        allowed = run.budget_cap - prompt_tokens - reply.completion_tokens
        capped = allowed < remaining
        remaining = min(remaining, allowed)
        if remaining <= 0:
            return codec.done_fields(finish_reason="budget", prompt_tokens=prompt_tokens,
                                     completion_tokens=reply.completion_tokens), "finalized"
    return _Ready(plan, remaining, capped, carried_ids)


def _generate_claimed(rt: Runtime, claim: Claim) -> str:
    settled = (stopped := steered.pending_run(claim)) is not None
    if settled:  # a message sent now: the reply it stops, saved first
        claim = steered.settle(rt, claim, stopped)
        if claim is None:
            return stream_writer.HANDED_BACK
        stage_trace.mark("worker.settled", claim.run.id)
    run, lease_token = claim.run, claim.lease_token
    reply = claim.so_far  # what earlier attempts streamed
    ready = _preflight(rt, claim)
    if not isinstance(ready, _Ready):
        fields, outcome = ready
        with_db_retry(run_end, run_id=run.id, lease_token=lease_token, fields=fields)
        return outcome
    plan, remaining, capped = ready.plan, ready.remaining, ready.capped
    active = ActiveRun(run_id=run.id, attempt=run.attempt, request_id=f"run-{run.id}-{run.attempt}",
                       lease_token=lease_token, next_seq=reply.completion_tokens,
                       prior_tokens=plan.num_carried_tokens, budget_capped=capped,
                       logprobs=run.sampling.get("logprobs") is not None, resumable=not constrained(run),
                       **_details(rt, run, plan))
    rt.writer.register(active)
    try:
        if rt.draining:  # the drain began while it was being claimed: it goes on elsewhere, unstarted here
            rt.writer.hand_back([active.request_id])
        else:
            rt.host.submit(engine_request(run, request_id=active.request_id, prompt_token_ids=plan.token_ids,
                                          max_tokens=remaining, carried_ids=ready.carried_ids))
            stage_trace.mark("worker.submitted", run.id)
            if settled:  # its record says what the prompt was built from, written as the engine starts
                with_db_retry(snapshot_settled, run_id=run.id, snapshot=run.prompt_snapshot)
            connection.close()  # no idle Postgres connection per waiting run: 32 slots would hold 32
        active.done.wait()
        stage_trace.mark("worker.ended", run.id)
    finally:
        rt.writer.unregister(active)
    if active.outcome == stream_writer.HANDED_BACK:
        log.info("run %s handed back to the queue after %d tokens", run.id, active.next_seq)
    elif active.outcome == stream_writer.SUPERSEDED:
        log.warning("run %s attempt %s superseded after %d tokens; nothing more written (engine total %d tokens)",
                    run.id, run.attempt, active.next_seq, rt.host.stats().generated_tokens)
    elif active.outcome == stream_writer.WRITE_FAILED:
        raise RuntimeError(f"run {run.id}: could not write its terminal entry; the sweep will finish it")
    else:
        # The chat is pinned to this worker, whose engine now caches its prefix, and the
        # reply's kept ids are indexed as held here, in the finalize's read: the chat's next
        # turn can only come once this reply has ended. Its reply's token ids are kept with
        # it: the next turn's prompt starts with them (a chat completion's are not: no turn follows).
        kept = token_memory.to_keep(rt.host, plan, active.output_ids) if run.keeps_token_ids else None
        with_db_retry(run_finalize, run_id=run.id, tokens=kept, also=lambda pipe: token_memory.held_here(
            pipe, worker=rt.worker_name, pool=rt.pool, run=run, plan=plan, kept=kept))
    return active.outcome


def _requeue(rt: Runtime, run: ClaimedRun) -> None:
    try:
        run_requeue(run_id=run.id, pool=rt.pool.name, tier=run.tier, tenant_id=run.tenant_id)
    except Exception:
        log.exception("run %s: could not send it back to its pool's queue; the sweep will", run.id)


def _reconverge(run_id: int) -> None:
    """A run this worker stopped because its lease lapsed (paused, or cut off from Redis)
    goes on at once if no other attempt took it meanwhile, not at the beat's next sweep
    (the sweep's own rule: chatsite.runs.services.sweep.run_reconverge). A worker still cut
    off cannot: the sweep does it later."""
    try:
        if run_reconverge(run_id=run_id) == "redispatched":
            log.warning("run %s: no other attempt held it once this worker's lease had lapsed; sent again", run_id)
    except Exception as exc:
        log.warning("run %s: could not send it again (%s); the beat's sweep will", run_id, exc)
