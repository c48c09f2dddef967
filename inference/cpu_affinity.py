"""On a CPU host: keep vLLM's engine-core process on the cores of the model worker it drives.

vLLM on CPU always runs the model in a worker process of its own (the CPU platform
turns the "uni" executor into "mp"), and the engine-core process waits for each
step's result by spinning on shared memory (`sched_yield`, for up to a second after
every read). Its model worker is bound to the engine's cores (VLLM_CPU_OMP_THREADS_BIND),
but the engine core may run anywhere, so on a small machine its spin took a whole core
from the web, the Celery worker, Redis and Postgres. Measured on 2 cores at 64
concurrent streams: the engine core used 10.7 CPU s per level unpinned and 2.2 s
pinned, and the platform's throughput went from 1031 to 1564 tokens/s.

On the engine's own cores the spin yields to the model worker (same run queue), which
is exactly what it waits for. The worker passes enabled=False when
settings.CHATSITE["COLOCATE_ENGINE_CORE"] is off (CHATSITE_COLOCATE_ENGINE_CORE=0).
"""
import logging
import os

from inference.engine_lifetime import engine_processes

log = logging.getLogger(__name__)


def colocate_engine_core(parent_pid: int | None = None, enabled: bool = True) -> set[int] | None:
    """Bind every thread of the engine-core process(es) under `parent_pid` (default:
    this process) to the cores its model workers are bound to. Returns those cores,
    or None when there is nothing to do (GPU platform, disabled, no binding)."""
    if not enabled or not hasattr(os, "sched_setaffinity"):
        return None
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return None
    engine_cores, workers = engine_processes(parent_pid or os.getpid())
    if not engine_cores or not workers:
        return None
    cores: set[int] = set()
    for worker in workers:
        cores |= set(worker.cpu_affinity())
    everywhere = set(os.sched_getaffinity(0)) | cores
    if not cores or cores == everywhere:
        return None  # the model may run anywhere: nothing to keep apart
    for proc in engine_cores:
        for thread in proc.threads():
            try:
                os.sched_setaffinity(thread.id, cores)
            except (ProcessLookupError, PermissionError):
                pass  # a thread that ended meanwhile
    log.info("vLLM engine core (pid %s) bound to the model's cores %s; cores %s stay free for the platform",
             ",".join(str(p.pid) for p in engine_cores), sorted(cores), sorted(everywhere - cores))
    return cores
