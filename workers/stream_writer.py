"""The step writer: every engine step's output of all runs in one Redis round trip.

The engine loop hands each step's deltas to `on_step` (never blocking it); one
writer thread turns them into stream entries. If it falls behind, the steps that
piled up are merged, so a slow Redis costs fewer, larger entries, not a stalled
engine. The same round trip reads the cancel flags of every active run.
"""
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field

import redis

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs import events
from chatsite.runs.streams import terminal_args
from inference.types import StepDelta

log = logging.getLogger(__name__)

IDLE_POLL_SECONDS = 0.2
# Steps arriving within this window after the first are written together: fewer
# entries, round trips and SSE frames (each costs the platform ~0.5 ms of CPU across
# worker, Redis and web), while text still arrives 50 times a second, faster than
# anyone reads. A run's first token is never held back (it is the TTFT).
COALESCE_SECONDS = float(os.environ.get("CHATSITE_COALESCE_MS", "20")) / 1000
REDIS_RETRY_SECONDS = 60.0


@dataclass
class ActiveRun:
    """A run this worker is generating, as the writer tracks it."""

    run_id: int
    attempt: int
    request_id: str
    next_seq: int
    budget_capped: bool = False  # its length limit is the tenant's budget: "length" means "budget"
    cancel_requested: bool = False
    handed_back: bool = False
    outcome: str = ""  # finished | handed_back | failed
    done: threading.Event = field(default_factory=threading.Event)


class StreamWriter:
    def __init__(self, *, abort):
        self._abort = abort  # callable(request_id): aborts in the engine
        self._runs: dict[str, ActiveRun] = {}
        self._awaiting_first: set[str] = set()  # runs with no token written yet (their first is never held)
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[list[StepDelta]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="stream-writer", daemon=True)
        self._thread.start()

    # --- called by task threads ------------------------------------------------
    def register(self, run: ActiveRun) -> None:
        with self._lock:
            self._runs[run.request_id] = run
            if run.next_seq == 0:
                self._awaiting_first.add(run.request_id)

    def unregister(self, run: ActiveRun) -> None:
        with self._lock:
            self._runs.pop(run.request_id, None)
            self._awaiting_first.discard(run.request_id)

    def hand_back(self, request_ids) -> None:
        """Stop these runs without a terminal entry; another attempt will continue them."""
        with self._lock:
            runs = [self._runs[r] for r in request_ids if r in self._runs]
        for run in runs:
            run.handed_back = True
            self._abort(run.request_id)

    def active(self) -> list[ActiveRun]:
        with self._lock:
            return list(self._runs.values())

    # --- called on the engine loop thread --------------------------------------
    def on_step(self, deltas: list[StepDelta]) -> None:
        self._queue.put(deltas)

    # --- the writer thread ---------------------------------------------------------
    def _loop(self) -> None:
        while True:
            try:
                deltas = self._queue.get(timeout=IDLE_POLL_SECONDS)
            except queue.Empty:
                deltas = []
            if deltas and COALESCE_SECONDS and not self._has_first_token(deltas):
                time.sleep(COALESCE_SECONDS)  # a run's first token is never held back: it is the TTFT
            while True:  # merge steps that arrived in the window or piled up while the last write ran
                try:
                    deltas.extend(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write(deltas)
            except Exception:
                log.exception("stream writer failed on a batch of %d deltas", len(deltas))

    def _has_first_token(self, deltas: list[StepDelta]) -> bool:
        """Costs nothing once every active run has streamed (the set is empty)."""
        waiting = self._awaiting_first
        return bool(waiting) and any(d.num_tokens and d.request_id in waiting for d in deltas)

    def _write(self, deltas: list[StepDelta]) -> None:
        with self._lock:
            active = dict(self._runs)
        if not deltas and not active:
            return
        # 1) coalesce each run's deltas into one entry, in order
        merged: dict[str, list[StepDelta]] = {}
        for d in deltas:
            if d.request_id in active:
                merged.setdefault(d.request_id, []).append(d)
        ops: list = []  # pipeline calls, replayed whole if Redis must be retried
        finished: list[tuple[ActiveRun, str]] = []
        for rid, ds in merged.items():
            run = active[rid]
            text = "".join(d.text for d in ds)
            n = sum(d.num_tokens for d in ds)
            if n or text:
                entry = events.token_fields(seq=run.next_seq, n=n, text=text, attempt=run.attempt)
                ops.append(("xadd", redis_keys.run_stream(run.run_id), entry))
                run.next_seq += n
                self._awaiting_first.discard(rid)
            last = ds[-1]
            if last.finished:
                outcome = self._terminal(ops, run, last)
                finished.append((run, outcome))
        # 2) whether any active run was cancelled: one command for all, in the same round trip
        flag_runs = [r for r in active.values() if not r.cancel_requested]
        if flag_runs:
            ops.append(("zmscore", redis_keys.cancelled_runs(), [r.run_id for r in flag_runs]))
        try:
            results = self._execute(ops)
        except Exception:
            for run, _ in finished:  # the task sees it and leaves the run to the sweep
                run.outcome = "write_failed"
                run.done.set()
            raise
        # 3) abort the cancelled ones in the engine (frees their KV blocks now)
        for run, flag in zip(flag_runs, results[-1] if flag_runs else ()):
            if flag is not None and not run.done.is_set():
                run.cancel_requested = True
                self._abort(run.request_id)
        # 4) wake the tasks whose run ended
        for run, outcome in finished:
            run.outcome = outcome
            run.done.set()

    def _terminal(self, ops, run: ActiveRun, last: StepDelta) -> str:
        if last.error:
            fields = events.error_fields(code="engine_error", message=last.error)
            outcome = "failed"
        elif last.finish_reason == "abort" and not run.cancel_requested:
            return "handed_back"  # drain or lost lease: no terminal entry, the run goes on elsewhere
        else:
            reason = "cancelled" if last.finish_reason == "abort" else (last.finish_reason or "stop")
            if reason == "length" and run.budget_capped:
                reason = "budget"
            fields = events.done_fields(finish_reason=reason, prompt_tokens=last.num_prompt_tokens,
                                        completion_tokens=run.next_seq)
            outcome = "finished"
        ops.append(("eval", *terminal_args(run.run_id, fields)))
        return outcome

    def _execute(self, ops: list) -> list:
        """Run the calls in one pipeline, retrying while Redis is unreachable (a
        restart); a retried XADD may repeat an entry, which readers skip by seq."""
        deadline = time.monotonic() + REDIS_RETRY_SECONDS
        delay = 0.05
        while True:
            pipe = get_redis().pipeline(transaction=False)
            for name, *args in ops:
                getattr(pipe, name)(*args)
            try:
                return pipe.execute()
            except (redis.ConnectionError, redis.TimeoutError):
                if time.monotonic() > deadline:
                    raise
                log.warning("redis unreachable; retrying the step write in %.2f s", delay)
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
