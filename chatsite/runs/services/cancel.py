"""Cancel: the Stop button. Closing a tab is not a cancel."""
import time

from django.conf import settings

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs import events
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.claim import run_claim, run_release
from chatsite.runs.services.finalize import run_finalize
from chatsite.runs.stream_reader import read_reply
from chatsite.runs.streams import write_terminal


def run_cancel(*, run: GenerationRun) -> GenerationRun:
    """Stop a run, keeping its partial reply. A running run's worker sees the flag
    at its next engine step and aborts the request in the engine (freeing its KV
    blocks); a run no live attempt holds is ended here at once. Idempotent."""
    if run.is_terminal:
        return run
    ttl = settings.CHATSITE["STREAM_TTL_SECONDS"]
    now = time.time()
    pipe = get_redis().pipeline(transaction=False)
    pipe.set(redis_keys.run_cancel(run.pk), "1", ex=ttl)
    pipe.zadd(redis_keys.cancelled_runs(), {str(run.pk): now})
    pipe.zremrangebyscore(redis_keys.cancelled_runs(), "-inf", now - ttl)  # no run lives that long
    pipe.execute()
    claim = run_claim(run_id=run.pk, worker="canceller")
    if claim is not None:  # nobody is generating it: end it ourselves
        try:
            reply = read_reply(run.pk)
            if reply.terminal is None:
                write_terminal(run.pk, events.done_fields(finish_reason="cancelled", prompt_tokens=0,
                                                           completion_tokens=reply.completion_tokens))
            run_finalize(run_id=run.pk)
        finally:
            run_release(run_id=run.pk, lease_token=claim.lease_token)
    run.refresh_from_db()
    return run
