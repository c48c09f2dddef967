"""The worker process's one engine: host, stream writer and heartbeat.

Configured from the pool's row in Postgres. CHATSITE_ENGINE=fake swaps in the
deterministic fake engine for platform tests; the default is always vLLM.
"""
import gc
import logging
import time
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, close_old_connections

from chatsite.pools.models import ModelPool
from inference import chat_templates
from inference.engine_host import EngineHost
from inference.engine_lifetime import EngineRecord
from workers.cancel_watch import CancelWatch
from workers.heartbeat import Heartbeat
from workers.stream_writer import StreamWriter

log = logging.getLogger(__name__)

ENABLED_POLL_SECONDS = settings.CHATSITE["ENABLED_POLL_SECONDS"]
STOP_POLL_SECONDS = 0.2  # how soon a worker waiting for its pool sees a shutdown asked for


class Runtime:
    def __init__(self, *, pool: ModelPool, worker_name: str, host: EngineHost, writer: StreamWriter):
        self.pool = pool
        self.worker_name = worker_name
        self.host = host
        self.writer = writer
        self.draining = False
        self.disabled = False  # waiting, with no engine loaded, for its disabled pool to be enabled
        self.heartbeat: Heartbeat | None = None
        self.cancel_watch = CancelWatch(writer.cancel_pushed)  # stops told as they are asked
        self.engine_record = engine_record(worker_name)


_current: Runtime | None = None


def current() -> Runtime | None:
    return _current


def engine_record(worker_name: str) -> EngineRecord:
    """The file naming the engine processes of the worker called `worker_name`."""
    return EngineRecord(Path(settings.CHATSITE["ENGINE_RECORD_DIR"]) / f"engine-{worker_name.replace('/', '_')}.json")


def _backend(pool: ModelPool, output_window):
    kind = settings.CHATSITE["ENGINE"]
    if kind == "fake":
        from inference.fake_backend import FakeBackend

        return FakeBackend(step_seconds=settings.CHATSITE["FAKE_STEP_SECONDS"], output_window=output_window)
    if kind != "vllm":
        raise RuntimeError(f"CHATSITE_ENGINE must be 'vllm' or 'fake', not {kind!r}")
    from inference.specs import EngineSpec
    from inference.vllm_backend import VllmBackend

    spec = EngineSpec.build(pool=pool.name, model=pool.model, context_length=pool.context_length,
                            engine_args=pool.engine_args)
    return VllmBackend(spec, colocate_engine_core=settings.CHATSITE["COLOCATE_ENGINE_CORE"],
                       output_window=output_window)


def _host(pool: ModelPool, writer: StreamWriter, holder: dict) -> EngineHost:
    template = chat_templates.read(pool.chat_template) if pool.chat_template else None
    holder["host"] = EngineHost(_backend(pool, writer.window), writer.on_step, name=pool.name, chat_template=template)
    return holder["host"]


def _enabled(pool: ModelPool, worker_name: str) -> ModelPool:
    """The pool's row once it is enabled. A worker of a disabled pool (a variant whose
    quality gate failed, a pool taken out of service) loads no engine, whose memory and
    cores would serve nobody: alive (its heartbeat says not ready), it looks again every
    ENABLED_POLL_SECONDS and loads the engine of the row as it is then. A shutdown
    asked for meanwhile (SIGTERM: Celery only marks it, for a consumer that has not
    started yet) ends the wait with Celery's WorkerShutdown, which stops the worker."""
    from celery.worker import state as worker_state

    log.warning("[%s] pool %s is disabled: its engine is not loaded until the pool is enabled (checked every "
                "%g s)", worker_name, pool.name, ENABLED_POLL_SECONDS)
    next_look = time.monotonic() + ENABLED_POLL_SECONDS
    while True:
        worker_state.maybe_shutdown()  # WorkerShutdown or WorkerTerminate (SystemExit) once asked
        time.sleep(min(STOP_POLL_SECONDS, max(0.0, next_look - time.monotonic())))
        if time.monotonic() < next_look:
            continue
        next_look = time.monotonic() + ENABLED_POLL_SECONDS
        try:
            row = ModelPool.objects.filter(pk=pool.pk, enabled=True).first()
        except DatabaseError:
            log.warning("[%s] could not read pool %s; looking again", worker_name, pool.name, exc_info=True)
            close_old_connections()
            continue
        if row is not None:
            log.info("[%s] pool %s is enabled", worker_name, pool.name)
            return row


def start(*, pool_name: str, worker_name: str) -> Runtime:
    """Load the pool's engine (blocking; ~30-40 s for vLLM on a CPU) and start heartbeats;
    for a disabled pool, first wait until it is enabled (heartbeats meanwhile)."""
    global _current
    # A predecessor under this name that died (SIGKILL, the OOM killer) may have left its engine
    # running: its memory is what this worker's engine needs.
    engine_record(worker_name).clear_predecessor()
    pool = ModelPool.objects.get(name=pool_name)
    holder: dict = {}
    writer = StreamWriter(abort=lambda rid: holder["host"].abort(rid))
    host = _host(pool, writer, holder)
    rt = Runtime(pool=pool, worker_name=worker_name, host=host, writer=writer)
    rt.disabled = not pool.enabled
    rt.heartbeat = Heartbeat(rt)
    rt.heartbeat.start()
    if not pool.enabled:
        try:
            pool = _enabled(pool, worker_name)
        except SystemExit:
            rt.heartbeat.stop()  # its key goes at once: no router counts this worker
            raise
        rt.pool, rt.host = pool, _host(pool, writer, holder)  # its settings as they are now
        host, rt.disabled = rt.host, False
    started = time.monotonic()
    log.info("[%s] pool %s: starting the engine for %s (vLLM takes ~30-40 s on a CPU) ...",
             worker_name, pool_name, pool.model)
    host.start()
    rt.cancel_watch.start()
    rt.engine_record.write()
    log.info("[%s] pool %s: engine ready in %.1f s; taking work", worker_name, pool_name, time.monotonic() - started)
    # What is loaded now (Django, Celery, vLLM's front end, the tokenizer) lives as long as
    # the process: frozen, the collector's full passes skip it, and a pass no longer
    # stalls the engine's output loop for every run at once.
    gc.collect()
    gc.freeze()
    _current = rt
    return rt


def stop(deadline_seconds: float | None = None) -> None:
    """Warm shutdown (SIGTERM): drain (workers.drain.shutdown_mode), then stop the heartbeat and the engine."""
    global _current
    rt = _current
    if rt is None:
        return
    from workers import drain as draining

    if deadline_seconds is None:
        deadline_seconds = settings.CHATSITE["DRAIN_SECONDS"]
    try:
        mode = draining.shutdown_mode(pool=rt.pool.name, worker_name=rt.worker_name)
    except Exception:  # Redis away: waiting is the safe choice
        log.warning("could not read the pool's workers; letting the runs finish", exc_info=True)
        mode = draining.FINISH
    draining.drain(rt, mode=mode, deadline_seconds=deadline_seconds)
    rt.cancel_watch.stop()
    rt.heartbeat.stop()
    rt.host.shutdown()
    rt.engine_record.remove()
    _current = None
