"""A finished run whose stream has expired, as the entries a follower yields, from Postgres."""
from chatsite.runs.models import GenerationRun
from chatsite.runs.stream import codec
from chatsite.runs.stream.codec import Entry


def finished_entries(run_id: int) -> list[Entry] | None:
    """The saved reply as one SNAPSHOT entry (with its saved log probabilities and other
    details, if the run asked for them), then the run's terminal entry; None
    while the run is not finished (or does not exist)."""
    run = GenerationRun.objects.select_related("assistant_message").filter(pk=run_id).first()
    if run is None or not run.is_terminal:
        return None
    if run.status == GenerationRun.Status.FAILED:
        code, _, message = run.error.partition(": ")
        terminal = codec.error_entry(code=code or "error", message=message or run.error)
    else:
        terminal = codec.done_entry(finish_reason=run.finish_reason, prompt_tokens=run.prompt_tokens,
                                    completion_tokens=run.completion_tokens,
                                    cached_tokens=(run.details or {}).get("cached_tokens", 0))
    extra = {k: v for k, v in (run.details or {}).items() if k != "cached_tokens"} or None
    return [codec.snapshot_entry(text=run.assistant_message.content, n=run.completion_tokens,
                                 logprobs=run.logprobs, extra=extra), terminal]
