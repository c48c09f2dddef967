"""The one vLLM stat logger: it keeps the engine's latest figures in an EngineCounters.

vLLM calls `record` after every engine step in the front-end process. The counters
(the worker's VllmBackend's, the quality gate's, a benchmark's) get: `scheduler` (the
latest SchedulerStats), running sums `prefix_queries`, `prefix_hits` and
`generated_tokens`, the most requests run in one step `peak_running`, `draft_tokens` /
`accepted_tokens` of speculative decoding, and `step_seconds`, the time between two
engine steps that produced output (a moving average; gaps over STEP_GAP_MAX_SECONDS, the
engine idle, are left out). vLLM is imported when the logger class is made.

vLLM's StatLoggerManager also adds its PrometheusStatLogger unless it is given one:
its counters and histograms fill the process's default Prometheus registry, which
nothing in a worker exports (the platform's /metrics reads Redis), and it runs after
every engine step in the front end, on the GIL the stream writer needs (7.7% of a
worker's GIL time in a profile at 64 streams; bench/probes/frontend_cpu.py measures it).
`stat_loggers` gives it a stand-in that records nothing.
"""
import time
from dataclasses import dataclass

# A longer gap between two steps with output is the engine idle, not its step time.
STEP_GAP_MAX_SECONDS = 0.5
STEP_AVERAGE_WEIGHT = 0.1  # of the newest gap in `step_seconds`


@dataclass
class EngineCounters:
    """What the recorder keeps of one engine's steps."""
    scheduler: object = None  # the latest SchedulerStats
    prefix_queries: int = 0
    prefix_hits: int = 0
    generated_tokens: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    peak_running: int = 0  # the most requests the scheduler ran in one step
    step_seconds: float = 0.0
    last_step_at: float = 0.0  # (monotonic)


def _step_done(sink: EngineCounters) -> None:
    """A step produced output: fold the time since the last one into `step_seconds`."""
    now = time.monotonic()
    gap, sink.last_step_at = now - sink.last_step_at, now
    if gap <= STEP_GAP_MAX_SECONDS:
        average = sink.step_seconds
        sink.step_seconds = gap if not average else average + STEP_AVERAGE_WEIGHT * (gap - average)


def stat_loggers(sink: EngineCounters) -> list:
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


def make_stats_logger(sink: EngineCounters):
    """A StatLoggerBase subclass recording onto `sink` (pass it in AsyncLLM's stat_loggers)."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class _Recorder(StatLoggerBase):
        def __init__(self, vllm_config, engine_index: int = 0):
            pass

        def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx: int = 0):
            if scheduler_stats is not None:
                sink.scheduler = scheduler_stats
                sink.peak_running = max(sink.peak_running, scheduler_stats.num_running_reqs)
                pcs = scheduler_stats.prefix_cache_stats
                if pcs is not None and not pcs.reset:
                    sink.prefix_queries += pcs.queries
                    sink.prefix_hits += pcs.hits
                spec = getattr(scheduler_stats, "spec_decoding_stats", None)  # (absent in some vLLM releases)
                if spec is not None:
                    sink.draft_tokens += spec.num_draft_tokens
                    sink.accepted_tokens += spec.num_accepted_tokens
            if iteration_stats is not None:
                sink.generated_tokens += iteration_stats.num_generation_tokens
                _step_done(sink)

        def log_engine_initialized(self):
            pass

    return _Recorder
