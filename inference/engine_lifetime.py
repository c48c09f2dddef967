"""An engine's processes live no longer than the worker that started them.

vLLM runs its engine core in a process of its own (`VLLM::EngineCore`), which starts
the model's worker process(es) (`VLLM::Worker`). A model worker ends with its engine
core (vLLM's death pipe), but vLLM 0.32 gives the engine core nothing that ends it with
its own parent: a worker killed with SIGKILL (or by the kernel's OOM killer) left its
engine re-parented to init, holding the model's memory (4.4 GB on the demo host, the
device's memory on a GPU) for minutes, and the restarted worker could not load.

Two guards, one for each way an engine outlives its worker:
- `engine_dies_with_parent()`: each engine core started afterwards, and each of its
  model workers, asks the kernel for SIGKILL when the thread that started it ends
  (PR_SET_PDEATHSIG), so the engine ends with its worker however the worker dies.
- `EngineRecord`: a file per worker name naming the engine's processes. A worker
  starting under that name ends those of a dead predecessor that still run (the
  kernel's guard is Linux-only, and a different vLLM may start its processes
  otherwise), and only those: the same pid, start time and vLLM process title.
"""
import ctypes
import json
import logging
import multiprocessing
import os
import signal
import sys
from pathlib import Path

log = logging.getLogger(__name__)

TITLE_PREFIX = "VLLM::"  # vLLM's process titles (VLLM_PROCESS_NAME_PREFIX, "VLLM" unless set)
ENGINE_CORE = f"{TITLE_PREFIX}EngineCore"
MODEL_WORKER = f"{TITLE_PREFIX}Worker"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
KILL_WAIT_SECONDS = 10.0


def process_title(proc) -> str:
    """A process's title as vLLM sets it (its argv[0]), or "" once it went away."""
    try:
        cmdline = proc.cmdline()
        return cmdline[0] if cmdline else proc.name()
    except Exception:  # it went away, or it is not ours to read
        return ""


def engine_processes(parent_pid: int) -> tuple[list, list]:
    """The engine-core and model-worker processes descending from `parent_pid` (psutil.Process)."""
    import psutil

    cores, workers = [], []
    for child in psutil.Process(parent_pid).children(recursive=True):
        title = process_title(child)
        if title.startswith(ENGINE_CORE):
            cores.append(child)
        elif title.startswith(MODEL_WORKER):
            workers.append(child)
    return cores, workers


# --- the engine core ends with its worker -------------------------------------
def die_with_parent() -> None:
    """Ask the kernel for SIGKILL when the thread that started this process ends; if the
    parent ended before the request was made, end now. Nothing to wait for: the
    engine's requests were its parent's, and the platform hands them to another worker."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        log.warning("PR_SET_PDEATHSIG failed (errno %d): this engine may outlive its worker", ctypes.get_errno())
        return
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:
        os.kill(os.getpid(), signal.SIGKILL)


def _patch(cls, name: str, wrapper) -> None:
    """cls.name (a static method: a process's target) becomes `wrapper`, which finds the
    original through _original()."""
    if getattr(cls, name) is not wrapper:
        wrapper.__wrapped__ = getattr(cls, name)
        setattr(cls, name, staticmethod(wrapper))


def _original(cls, name: str, wrapper):
    target = getattr(cls, name)
    return wrapper.__wrapped__ if target is wrapper else target  # forked: the parent's patch came along


def _run_engine_core(*args, **kwargs):
    """vLLM's engine-core entry point (its process's target, pickled by name so that a
    spawned child finds it too), dying with its parent first; so do its model workers."""
    from vllm.v1.engine.core import EngineCoreProc
    from vllm.v1.executor.multiproc_executor import WorkerProc

    die_with_parent()
    # vLLM's death pipe ends a model worker too, but only after its teardown: seconds more,
    # longer than 10 s on a loaded host, holding the model's memory all that time.
    _patch(WorkerProc, "worker_main", _run_model_worker)
    return _original(EngineCoreProc, "run_engine_core", _run_engine_core)(*args, **kwargs)


def _run_model_worker(*args, **kwargs):
    """vLLM's model-worker entry point, dying with its engine core first."""
    from vllm.v1.executor.multiproc_executor import WorkerProc

    die_with_parent()
    return _original(WorkerProc, "worker_main", _run_model_worker)(*args, **kwargs)


def engine_dies_with_parent() -> None:
    """Every vLLM engine this process starts from now on ends when the thread that started
    it ends (the engine host's loop thread, which lives as long as its engine): its engine
    core, then its model workers with it. Linux only; elsewhere the EngineRecord is the
    only guard."""
    if not sys.platform.startswith("linux"):
        return
    from vllm.v1.engine.core import EngineCoreProc

    _patch(EngineCoreProc, "run_engine_core", _run_engine_core)


# --- a dead predecessor's engine ------------------------------------------------
def _identity(proc) -> dict:
    return {"pid": proc.pid, "started": proc.create_time(), "title": process_title(proc)}


def _running(entry: dict):
    """The process `entry` names if it still runs as that same process, else None."""
    import psutil

    try:
        proc = psutil.Process(entry["pid"])
        if abs(proc.create_time() - entry["started"]) > 0.01:
            return None  # the pid was reused
        return proc if proc.status() != psutil.STATUS_ZOMBIE else None
    except (psutil.Error, KeyError, TypeError):
        return None


class EngineRecord:
    """The file naming one worker's engine processes (one file per worker name)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def clear_predecessor(self) -> list[int]:
        """End the engine processes the file names, if the worker that wrote it is dead and
        they still run as the processes recorded, then forget the file. A live writer keeps
        its engine (two workers under one name: the other is not ours to end). Returns the
        pids it ended."""
        import psutil

        try:
            record = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError):
            log.warning("engine record %s unreadable: ignored", self.path)
            record = {}
        if isinstance(record, dict) and _running(record.get("worker") or {}) is not None:
            log.warning("engine record %s: its worker (pid %s) still runs; its engine is left alone",
                        self.path, record["worker"]["pid"])
            return []
        entries = record.get("engine", []) if isinstance(record, dict) else []
        leftovers = [proc for entry in entries
                     if (proc := _running(entry)) is not None and process_title(proc) == entry.get("title")
                     and entry["title"].startswith(TITLE_PREFIX)]
        for proc in leftovers:
            try:
                proc.send_signal(signal.SIGKILL)  # an orphan: nobody to answer, nothing to drain
            except psutil.NoSuchProcess:
                pass
            except psutil.Error as exc:  # not ours to end (another user's): said, and the start goes on
                log.warning("could not end pid %s of a dead predecessor's engine: %s", proc.pid, exc)
        _, alive = psutil.wait_procs(leftovers, timeout=KILL_WAIT_SECONDS)
        if leftovers:
            log.warning("ended a dead predecessor's engine: pids %s%s", [p.pid for p in leftovers],
                        f" (still running: {[p.pid for p in alive]})" if alive else "")
        self._forget()
        return [p.pid for p in leftovers if p not in alive]

    def write(self, worker_pid: int | None = None) -> None:
        """Name the worker (default: this process) and the engine processes under it."""
        import psutil

        worker = psutil.Process(worker_pid or os.getpid())
        cores, workers = engine_processes(worker.pid)
        record = {"worker": _identity(worker), "engine": [_identity(p) for p in cores + workers]}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(record))
            os.replace(tmp, self.path)
        except OSError as exc:  # a read-only disk: the engine still serves, with one guard fewer
            log.warning("engine record %s not written (%s): a next start cannot end this engine if it "
                        "outlives this worker", self.path, exc)

    def remove(self) -> None:
        """Forget the file after a clean stop, if it still names this process."""
        try:
            if json.loads(self.path.read_text())["worker"]["pid"] == os.getpid():
                self._forget()
        except (OSError, ValueError, KeyError, TypeError):
            pass

    def _forget(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("engine record %s not removed: %s", self.path, exc)
