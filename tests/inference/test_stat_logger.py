"""The platform's stat loggers keep vLLM's Prometheus logger out of the engine's front
end (its metrics were never exported by a worker, and it ran after every engine step),
and still record the figures a worker reports. No engine is started."""
import pytest
from vllm.v1.metrics.loggers import PrometheusStatLogger, StatLoggerManager
from vllm.v1.metrics.stats import IterationStats, PrefixCacheStats, SchedulerStats

from inference.stat_logger import EngineCounters, make_stats_logger, stat_loggers


def _made_prometheus(monkeypatch) -> list:
    made = []
    monkeypatch.setattr(PrometheusStatLogger, "__init__", lambda self, *a, **kw: made.append(self))
    return made


def _manager(loggers) -> StatLoggerManager:
    # No vLLM config is needed by these loggers; vLLM's default logging one stays off here.
    return StatLoggerManager(vllm_config=None, custom_stat_loggers=loggers, enable_default_loggers=False)


def test_vllm_adds_its_prometheus_logger_unless_given_one_and_the_platform_gives_the_stand_in(monkeypatch):
    made = _made_prometheus(monkeypatch)
    _manager([make_stats_logger(EngineCounters())])
    assert len(made) == 1  # vLLM's own, added behind the recorder's back

    made.clear()
    manager = _manager(stat_loggers(EngineCounters()))
    assert made == []  # the stand-in is a PrometheusStatLogger that builds nothing
    prometheus = [lg for lg in manager.stat_loggers if isinstance(lg, PrometheusStatLogger)]
    assert len(prometheus) == 1 and type(prometheus[0]).__name__ == "_NoPrometheus"


def test_the_recorder_still_gets_every_step_and_the_stand_in_ignores_them():
    sink = EngineCounters()
    manager = _manager(stat_loggers(sink))
    scheduler = SchedulerStats(num_running_reqs=5, prefix_cache_stats=PrefixCacheStats(queries=40, hits=30))
    iteration = IterationStats()
    iteration.num_generation_tokens = 7
    for _ in range(2):
        manager.record(scheduler, iteration)
    manager.log()
    manager.record_sleep_state(1, 0)
    manager.record_admission_rejection("queue full")
    assert sink.scheduler is scheduler and sink.peak_running == 5
    assert (sink.prefix_queries, sink.prefix_hits, sink.generated_tokens) == (80, 60, 14)


def test_the_recorder_keeps_the_time_between_steps_and_leaves_idle_gaps_out(monkeypatch):
    from inference import stat_logger

    clock = [100.0]
    monkeypatch.setattr(stat_logger.time, "monotonic", lambda: clock[0])
    sink = EngineCounters()
    manager = _manager(stat_loggers(sink))

    def step(after: float, output: bool = True) -> None:
        clock[0] += after
        manager.record(SchedulerStats(), IterationStats() if output else None)

    step(0)
    assert sink.step_seconds == 0.0  # one step: no gap yet
    step(0.010)
    assert sink.step_seconds == pytest.approx(0.010)
    step(0.020)
    assert sink.step_seconds == pytest.approx(0.011)  # a moving average: 0.9 * 10 ms + 0.1 * 20 ms
    step(30.0)  # the engine sat idle: not a step time
    assert sink.step_seconds == pytest.approx(0.011)
    step(0.001, output=False)  # a step without output (vLLM passes no iteration stats)
    assert sink.step_seconds == pytest.approx(0.011)
