"""The worker process's one engine: host, stream writer and heartbeat.

Configured from the pool's row in Postgres. CHATSITE_ENGINE=fake swaps in the
deterministic fake engine for platform tests; the default is always vLLM.
"""
import gc
import logging
import time

from django.conf import settings

from chatsite.pools.models import ModelPool
from inference import chat_templates
from inference.engine_host import EngineHost
from workers.heartbeat import Heartbeat
from workers.stream_writer import StreamWriter

log = logging.getLogger(__name__)


class Runtime:
    def __init__(self, *, pool: ModelPool, worker_name: str, host: EngineHost, writer: StreamWriter):
        self.pool = pool
        self.worker_name = worker_name
        self.host = host
        self.writer = writer
        self.draining = False
        self.heartbeat: Heartbeat | None = None


_current: Runtime | None = None


def current() -> Runtime | None:
    return _current


def _backend(pool: ModelPool, output_window):
    kind = settings.CHATSITE["ENGINE"]
    if kind == "fake":
        from inference.fake_backend import FakeBackend

        return FakeBackend(step_seconds=settings.CHATSITE["FAKE_STEP_SECONDS"])
    if kind != "vllm":
        raise RuntimeError(f"CHATSITE_ENGINE must be 'vllm' or 'fake', not {kind!r}")
    from inference.specs import EngineSpec
    from inference.vllm_backend import VllmBackend

    spec = EngineSpec.build(pool=pool.name, model=pool.model, context_length=pool.context_length,
                            engine_args=pool.engine_args)
    return VllmBackend(spec, colocate_engine_core=settings.CHATSITE["COLOCATE_ENGINE_CORE"],
                       output_window=output_window)


def start(*, pool_name: str, worker_name: str) -> Runtime:
    """Load the pool's engine (blocking; ~30-40 s for vLLM on a CPU) and start heartbeats."""
    global _current
    pool = ModelPool.objects.get(name=pool_name)
    holder: dict = {}
    writer = StreamWriter(abort=lambda rid: holder["host"].abort(rid))
    template = chat_templates.read(pool.chat_template) if pool.chat_template else None
    host = EngineHost(_backend(pool, writer.window), writer.on_step, name=pool_name, chat_template=template)
    holder["host"] = host
    rt = Runtime(pool=pool, worker_name=worker_name, host=host, writer=writer)
    rt.heartbeat = Heartbeat(rt)
    rt.heartbeat.start()
    started = time.monotonic()
    log.info("[%s] pool %s: starting the engine for %s (vLLM takes ~30-40 s on a CPU) ...",
             worker_name, pool_name, pool.model)
    host.start()
    log.info("[%s] pool %s: engine ready in %.1f s; taking work", worker_name, pool_name, time.monotonic() - started)
    # What is loaded now (Django, Celery, vLLM's front end, the tokenizer) lives as long as
    # the process: frozen, the collector's full passes skip it, and a pass no longer
    # stalls the engine's output loop for every run at once.
    gc.collect()
    gc.freeze()
    _current = rt
    return rt


def drain(deadline_seconds: float) -> None:
    """Stop taking work, let runs finish until the deadline, then hand the rest back
    to the queue (another worker continues them from their streams)."""
    rt = _current
    if rt is None:
        return
    rt.draining = True
    rt.heartbeat.beat_quietly()  # routers see "draining" at once
    log.warning("draining: %d run(s) in flight, deadline %.0f s", len(rt.writer.active()), deadline_seconds)
    end = time.monotonic() + deadline_seconds
    while rt.writer.active() and time.monotonic() < end:
        time.sleep(0.1)
    left = [r.request_id for r in rt.writer.active()]
    if left:
        log.warning("drain deadline passed; handing %d run(s) back to the queue", len(left))
        rt.writer.hand_back(left)
        wait_end = time.monotonic() + 10
        while rt.writer.active() and time.monotonic() < wait_end:
            time.sleep(0.05)
    log.warning("drained")


def stop(deadline_seconds: float | None = None) -> None:
    """Warm shutdown (SIGTERM): drain, then stop the heartbeat and the engine."""
    global _current
    rt = _current
    if rt is None:
        return
    if deadline_seconds is None:
        deadline_seconds = settings.CHATSITE["DRAIN_SECONDS"]
    drain(deadline_seconds)
    rt.heartbeat.stop()
    rt.host.shutdown()
    _current = None
