"""How many engine steps vLLM gathers into one output of a request (its
`stream_interval`), for the real engine and the fake one alike."""

# The most engine steps gathered into one output of a request.
MAX_STREAM_INTERVAL = 16


def stream_interval(window: float, step_seconds: float) -> int:
    """How many engine steps vLLM gathers into one output of a request so that outputs
    come about once per `window` (the stream writer's coalescing window): a request's
    output objects (vLLM's RequestOutput, the host's chunk and delta) are made per output,
    not per token, while the entries, each of a window's tokens, stay the same. 1 (every
    step) with no window or no step time measured yet."""
    if window <= 0 or step_seconds <= 0:
        return 1
    return max(1, min(MAX_STREAM_INTERVAL, round(window / step_seconds)))
