"""Cancel: the Stop button. Closing a tab is not a cancel."""
from chatsite import stage_trace
from chatsite.runs import fair_queue
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.claim import run_claim, run_release
from chatsite.runs.services.finalize import run_end
from chatsite.runs.stream import codec, log


def run_cancel(*, run: GenerationRun) -> GenerationRun:
    """Stop a run, keeping its partial reply. A running run's worker sees the ask
    at its next engine step and aborts the request in the engine (freeing its KV
    blocks); a run no live attempt holds is ended here at once. Idempotent."""
    if run.is_terminal:
        return run
    log.cancel_ask(run.pk)
    stage_trace.mark("web.stop_asked", run.pk)
    claim = run_claim(run_id=run.pk, worker="canceller")
    if claim is not None:  # nobody is generating it: end it ourselves
        try:
            reply = log.read(run.pk)
            fields = (codec.error_fields(code=reply.gap.code, message=reply.gap.message) if reply.gap else
                      codec.done_fields(finish_reason="cancelled", prompt_tokens=0,
                                        completion_tokens=reply.completion_tokens))
            run_end(run_id=run.pk, lease_token=claim.lease_token, fields=fields)
        finally:
            run_release(run_id=run.pk, lease_token=claim.lease_token)
        # Ended: it leaves the fair queue (a worker that popped it meanwhile skips it: its claim fails).
        fair_queue.remove(pool=run.pool.name, tier=run.tier, tenant_id=run.tenant_id, run_id=run.pk)
    run.refresh_from_db()
    return run
