"""Stage timestamps along a run's path to its first token, for bench.probes.probe_ttft --stages.

Off unless CHATSITE_STAGE_TRACE names a file (then a mark is one list append, and
a call costs one test of a module global when it is off). Each process appends
lines "<epoch s> <pid> <thread id> <stage> <run id or -> <thread CPU ms>" to it,
in batches (a write per mark gave the writing thread's GIL away at every mark,
which moved the very waits being measured) and at exit. A stage without a run id
belongs to the next one with an id in the same process: read them one request at
a time (`--burst 1`). The thread CPU time tells, between two marks of one thread,
how much of the wait was its own work.
"""
import atexit
import os
import threading
import time

_PATH = os.environ.get("CHATSITE_STAGE_TRACE") or None
FLUSH_EVERY = 64
_lines: list[str] = []
_lock = threading.Lock()


def enabled() -> bool:
    return _PATH is not None


def mark(stage: str, run_id: int | None = None) -> None:
    if _PATH is None:
        return
    _lines.append(f"{time.time():.6f} {os.getpid()} {threading.get_ident()} {stage} "
                  f"{'-' if run_id is None else run_id} {time.thread_time() * 1000:.3f}\n")
    if len(_lines) >= FLUSH_EVERY:
        flush()


def flush() -> None:
    global _lines
    with _lock:
        lines, _lines = _lines, []
    if lines:
        with open(_PATH, "a") as f:
            f.writelines(lines)


if _PATH is not None:
    atexit.register(flush)
