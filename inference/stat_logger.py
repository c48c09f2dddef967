"""The one vLLM stat logger: it keeps the engine's latest figures on a sink object.

vLLM calls `record` after every engine step in the front-end process. The sink
(the worker's VllmBackend, the quality gate's counters, a benchmark's) gets:
`_scheduler` (the latest SchedulerStats), running sums `_prefix_queries`,
`_prefix_hits` and `_generated_tokens`, the most requests run in one step
`_peak_running`, `_draft_tokens` / `_accepted_tokens`
of speculative decoding, and `_step_seconds`, the time between two engine steps that
produced output (a moving average; gaps over STEP_GAP_MAX_SECONDS, the engine idle,
are left out). vLLM is imported when the logger class is made.

vLLM's StatLoggerManager also adds its PrometheusStatLogger unless it is given one:
its counters and histograms fill the process's default Prometheus registry, which
nothing in a worker exports (the platform's /metrics reads Redis), and it runs after
every engine step in the front end, on the GIL the stream writer needs (7.7% of a
worker's GIL time in a profile at 64 streams; bench/probes/frontend_cpu.py measures it).
`stat_loggers` gives it a stand-in that records nothing.
"""
import time

# A longer gap between two steps with output is the engine idle, not its step time.
STEP_GAP_MAX_SECONDS = 0.5
STEP_AVERAGE_WEIGHT = 0.1  # of the newest gap in `_step_seconds`


class EngineCounters:
    """A plain sink for callers without an object of their own."""

    def __init__(self):
        self._scheduler = None
        self._prefix_queries = self._prefix_hits = self._generated_tokens = 0
        self._draft_tokens = self._accepted_tokens = self._peak_running = 0
        self._step_seconds = self._last_step_at = 0.0


def _add(sink, name: str, value: int) -> None:
    setattr(sink, name, getattr(sink, name, 0) + value)


def _step_done(sink) -> None:
    """A step produced output: fold the time since the last one into `_step_seconds`."""
    now = time.monotonic()
    gap = now - getattr(sink, "_last_step_at", 0.0)
    sink._last_step_at = now
    if gap <= STEP_GAP_MAX_SECONDS:
        average = getattr(sink, "_step_seconds", 0.0)
        sink._step_seconds = gap if not average else average + STEP_AVERAGE_WEIGHT * (gap - average)


def stat_loggers(sink) -> list:
    """AsyncLLM's stat_loggers for a platform engine: the recorder onto `sink`, and the
    stand-in that keeps vLLM's Prometheus logger out."""
    return [make_stats_logger(sink), no_prometheus_logger()]


def no_prometheus_logger():
    """A PrometheusStatLogger in name only (StatLoggerManager adds the real one unless
    one is given): it creates no metric and records nothing."""
    from vllm.v1.metrics.loggers import PrometheusStatLogger

    class _NoPrometheus(PrometheusStatLogger):
        def __init__(self, vllm_config, engine_indexes=None):
            pass

        def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx: int = 0):
            pass

        def record_sleep_state(self, is_awake: int = 0, level: int = 0):
            pass

        def record_admission_rejection(self, reason: str) -> None:
            pass

        def log_engine_initialized(self):
            pass

    return _NoPrometheus


def make_stats_logger(sink):
    """A StatLoggerBase subclass recording onto `sink` (pass it in AsyncLLM's stat_loggers)."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class _Recorder(StatLoggerBase):
        def __init__(self, vllm_config, engine_index: int = 0):
            pass

        def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx: int = 0):
            if scheduler_stats is not None:
                sink._scheduler = scheduler_stats
                sink._peak_running = max(getattr(sink, "_peak_running", 0), scheduler_stats.num_running_reqs)
                pcs = scheduler_stats.prefix_cache_stats
                if pcs is not None and not pcs.reset:
                    _add(sink, "_prefix_queries", pcs.queries)
                    _add(sink, "_prefix_hits", pcs.hits)
                spec = getattr(scheduler_stats, "spec_decoding_stats", None)
                if spec is not None:
                    _add(sink, "_draft_tokens", spec.num_draft_tokens)
                    _add(sink, "_accepted_tokens", spec.num_accepted_tokens)
            if iteration_stats is not None:
                _add(sink, "_generated_tokens", iteration_stats.num_generation_tokens)
                _step_done(sink)

        def log_engine_initialized(self):
            pass

    return _Recorder
