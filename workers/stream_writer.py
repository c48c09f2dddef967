"""The step writer: every engine step's output of all runs in one Redis round trip.

The engine loop hands each step's deltas to `on_step` (never blocking it); one
writer thread turns them into stream entries and writes them with one call of the
fenced append (chatsite.runs.stream.log): each run's entry is accepted only while
its attempt holds the run's lease, and the same call says which runs were
cancelled. A run whose lease another attempt took is aborted in the engine at once
and gets nothing more written. If the writer falls behind, the steps that piled up
are merged, so a slow Redis costs fewer, larger entries, not a stalled engine.
"""
import logging
import queue
import threading
import time
from dataclasses import dataclass, field

import redis
from django.conf import settings

from chatsite import stage_trace
from chatsite.runs.stream import codec, log as stream_log
from chatsite.runs.stream.log import CANCEL_ASKED, STALE, Write
from inference.types import REFUSED_PREFIX, StepDelta

log = logging.getLogger(__name__)

IDLE_POLL_SECONDS = 0.2
# Steps arriving within the window after the first are written together: fewer
# entries, round trips and SSE frames (each costs the platform CPU across worker,
# Redis and web). A run's first token is never held back (it is the TTFT).
COALESCE_SECONDS = settings.CHATSITE["COALESCE_SECONDS"]
COALESCE_BUSY_SECONDS = settings.CHATSITE["COALESCE_BUSY_SECONDS"]
COALESCE_BUSY_RUNS = settings.CHATSITE["COALESCE_BUSY_RUNS"]
REDIS_RETRY_SECONDS = 60.0


def coalesce_window(runs: int, light: float = COALESCE_SECONDS, busy: float = COALESCE_BUSY_SECONDS,
                    busy_runs: int = COALESCE_BUSY_RUNS) -> float:
    """Seconds of steps gathered into one entry while `runs` runs stream: `light` for one
    run (text 50 times a second by default, for the user watching it alone), growing in
    a straight line to `busy` at `busy_runs` runs (20 times a second by default, still
    faster than anyone reads), where entries cost what matters: each is a frame for the
    web and a write for Redis, and fewer, larger ones cost less per token."""
    if runs <= 1 or busy <= light:
        return light
    if busy_runs <= 1:
        return busy
    return light + (busy - light) * min(1.0, (runs - 1) / (busy_runs - 1))


# What became of a run, as its task reads it once `done` is set.
FINISHED, FAILED, HANDED_BACK, SUPERSEDED, WRITE_FAILED = (
    "finished", "failed", "handed_back", "superseded", "write_failed")


@dataclass
class ActiveRun:
    """A run this worker is generating, as the writer tracks it."""

    run_id: int
    attempt: int
    request_id: str
    lease_token: str
    next_seq: int
    prior_tokens: int = 0  # the prompt's tail that earlier attempts streamed: billed as completion only
    budget_capped: bool = False  # its length limit is the tenant's budget: "length" means "budget"
    logprobs: bool = False  # it asked for log probabilities: its token entries carry them
    token_ids: bool = False  # it asked for its tokens' ids: its token entries carry them
    # What its first token entry (seq 0) says of the prompt (its ids, its text), and with
    # `prompt_logprobs` the engine's log probabilities of it; None: nothing asked for.
    prompt_extra: dict | None = None
    prompt_logprobs: bool = False
    # A drain hands it over at once (a constrained reply may finish first: workers.drain).
    resumable: bool = True
    cancel_requested: bool = False
    # Every id the engine generated, once it finished (stop, length, or stopped): the reply's record.
    output_ids: tuple[int, ...] = ()
    outcome: str = ""
    done: threading.Event = field(default_factory=threading.Event)


def _extra(run: ActiveRun, deltas: list[StepDelta]) -> dict | None:
    """A detailed run's entry's other details: its tokens' ids, and in its first entry
    (seq 0, whichever attempt writes it) the prompt's."""
    extra = {}
    if run.token_ids:
        extra["ids"] = [i for d in deltas for i in d.token_ids]
    if run.next_seq == 0 and run.prompt_extra is not None:
        extra.update(run.prompt_extra)
        if run.prompt_logprobs:
            extra["prompt_logprobs"] = next((d.prompt_logprobs for d in deltas if d.prompt_logprobs), None)
    return extra or None


class StreamWriter:
    def __init__(self, *, abort):
        self._abort = abort  # callable(request_id): aborts in the engine
        self._runs: dict[str, ActiveRun] = {}
        self._awaiting_first: set[str] = set()  # runs with no token written yet (their first is never held)
        self._stopping: set[str] = set()  # runs aborted here for a stop (their end is never held either)
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
            self._stopping.discard(run.request_id)

    def hand_back(self, request_ids) -> None:
        """Stop these runs without a terminal entry; another attempt will continue them."""
        self._stop(request_ids, HANDED_BACK)

    def supersede(self, run_ids) -> None:
        """These runs' leases are gone: abort them and write nothing more for them."""
        with self._lock:
            request_ids = [r.request_id for r in self._runs.values() if r.run_id in run_ids]
        self._stop(request_ids, SUPERSEDED)

    def window(self) -> float:
        """The coalescing window for the runs streaming now (the engine asks for outputs
        about this often, too: inference.vllm_backend.stream_interval)."""
        return coalesce_window(len(self._runs))

    def active(self) -> list[ActiveRun]:
        with self._lock:
            return list(self._runs.values())

    def _stop(self, request_ids, why: str) -> None:
        with self._lock:
            runs = [self._runs.pop(r) for r in request_ids if r in self._runs]
        for run in runs:
            self._awaiting_first.discard(run.request_id)
            if self._settle(run, why):
                self._abort(run.request_id)

    def _settle(self, run: ActiveRun, outcome: str) -> bool:
        """Tell the run's task how it ended; the first outcome wins (False if one was set)."""
        with self._lock:
            if run.outcome:
                return False
            run.outcome = outcome
        run.done.set()
        return True

    # --- called on the engine loop thread --------------------------------------
    def on_step(self, deltas: list[StepDelta]) -> None:
        if stage_trace.enabled():
            self._trace_first_outputs(deltas)
        self._queue.put(deltas)

    def _trace_first_outputs(self, deltas: list[StepDelta]) -> None:
        for d in deltas:
            run = self._runs.get(d.request_id) if d.num_tokens and d.request_id in self._awaiting_first else None
            if run is not None:
                stage_trace.mark("engine.first_output", run.run_id)

    # --- the writer thread ---------------------------------------------------------
    def _loop(self) -> None:
        while True:
            try:
                deltas = self._queue.get(timeout=IDLE_POLL_SECONDS)
            except queue.Empty:
                deltas = []
            if deltas and not self._urgent(deltas):
                self._gather(deltas, self.window())
            while True:  # merge steps that piled up while the last write ran
                try:
                    deltas.extend(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write(deltas)
            except Exception:
                log.exception("stream writer failed on a batch of %d deltas", len(deltas))

    def _gather(self, deltas: list[StepDelta], window: float) -> None:
        """Add to `deltas` the steps that arrive within `window`; cut short by a step that
        must not wait (a run's first token, a stopped run's end: `_urgent`)."""
        deadline = time.monotonic() + window
        while (left := deadline - time.monotonic()) > 0:
            try:
                more = self._queue.get(timeout=left)
            except queue.Empty:
                return
            deltas.extend(more)
            if self._urgent(more):
                return

    def _urgent(self, deltas: list[StepDelta]) -> bool:
        """A run's first token (it is the TTFT) or a stopped run's end is never held back."""
        return self._has_first_token(deltas) or self._stops_a_run(deltas)

    def _has_first_token(self, deltas: list[StepDelta]) -> bool:
        """Costs nothing once every active run has streamed (the set is empty)."""
        waiting = self._awaiting_first
        return bool(waiting) and any(d.num_tokens and d.request_id in waiting for d in deltas)

    def _stops_a_run(self, deltas: list[StepDelta]) -> bool:
        """A stopped run's end is never held back either: someone waits on it (the Stop button,
        a "send now" whose message starts then), and nothing of that run comes after it.
        Costs nothing while no stop is under way (the set is empty)."""
        stopping = self._stopping
        return bool(stopping) and any(d.finished and d.request_id in stopping for d in deltas)

    def _write(self, deltas: list[StepDelta]) -> None:
        with self._lock:
            active = dict(self._runs)
        if not active:
            return
        # 1) each active run's deltas become one entry (and its terminal entry, if it ended)
        merged: dict[str, list[StepDelta]] = {}
        for d in deltas:
            if d.request_id in active:
                merged.setdefault(d.request_id, []).append(d)
        writes: list[Write] = []
        runs: list[ActiveRun] = []
        firsts = [] if stage_trace.enabled() else None  # runs whose first token this batch writes
        ended: dict[int, str] = {}  # run id -> outcome, for runs whose terminal entry is in this batch
        for rid, run in active.items():
            write = Write(run.run_id, run.lease_token)
            ds = merged.get(rid)
            if ds:
                text = "".join(d.text for d in ds)
                n = sum(d.num_tokens for d in ds)
                if n or text:
                    if run.logprobs or run.token_ids or run.prompt_extra is not None:  # only they pay for details
                        write.token = codec.logprobs_token_fields(
                            seq=run.next_seq, n=n, text=text, attempt=run.attempt,
                            logprobs=[lp for d in ds if d.logprobs for lp in d.logprobs] if run.logprobs else None,
                            extra=_extra(run, ds))
                    else:
                        write.token = codec.token_fields(seq=run.next_seq, n=n, text=text, attempt=run.attempt)
                    run.next_seq += n
                    if firsts is not None and rid in self._awaiting_first:
                        firsts.append(run.run_id)
                    self._awaiting_first.discard(rid)
                if ds[-1].finished:
                    outcome, write.terminal = self._terminal(run, ds[-1])
                    ended[run.run_id] = outcome
                    run.output_ids = ds[-1].output_token_ids
            writes.append(write)
            runs.append(run)
        # 2) one fenced append for all: lease checked, entries written, cancels read
        try:
            answers = self._execute(writes)
            for run_id in firsts or ():
                stage_trace.mark("writer.first_written", run_id)
        except Exception:
            for run in runs:
                if run.run_id in ended:  # the task sees it and leaves the run to the sweep
                    self._settle(run, WRITE_FAILED)
            raise
        # 3) superseded runs stop at once; cancelled ones are aborted (frees their KV blocks)
        for run, answer in zip(runs, answers):
            if answer == STALE:
                log.warning("run %s attempt %s: another attempt holds the run; stopping here", run.run_id,
                            run.attempt)
                self._stop([run.request_id], SUPERSEDED)
            elif ended.get(run.run_id) == HANDED_BACK:  # the engine aborted it: the run goes on elsewhere
                self._stop([run.request_id], HANDED_BACK)
            elif run.run_id in ended:
                if run.cancel_requested:
                    stage_trace.mark("writer.stop_written", run.run_id)
                self._settle(run, ended[run.run_id])  # 4) wake the task whose run ended
            elif answer == CANCEL_ASKED:
                self._cancel(run)

    def cancel_pushed(self, run_id: int) -> None:
        """A stop asked for `run_id`, pushed as it was asked (workers.cancel_watch): aborted now,
        not at the run's next append. Nothing for a run this worker does not hold."""
        with self._lock:
            run = next((r for r in self._runs.values() if r.run_id == run_id), None)
        if run is not None:
            self._cancel(run)

    def _cancel(self, run: ActiveRun) -> None:
        """Abort a run whose stop was asked, once (its append's read and the push may both see it)."""
        with self._lock:
            if run.cancel_requested:
                return
            run.cancel_requested = True
        stage_trace.mark("writer.cancel_seen", run.run_id)
        self._stopping.add(run.request_id)
        self._abort(run.request_id)

    def _terminal(self, run: ActiveRun, last: StepDelta) -> tuple[str, dict | None]:
        if last.error:
            if last.error.startswith(REFUSED_PREFIX):  # the request's own fault: a client error to its caller
                return FAILED, codec.error_fields(code=codec.REFUSED_CODE, message=last.error[len(REFUSED_PREFIX):])
            return FAILED, codec.error_fields(code="engine_error", message=last.error)
        if last.finish_reason == "abort" and not run.cancel_requested:
            return HANDED_BACK, None  # drain: no terminal entry, the run goes on elsewhere
        reason = "cancelled" if last.finish_reason == "abort" else (last.finish_reason or "stop")
        if reason == "length" and run.budget_capped:
            reason = "budget"
        prompt_tokens = max(0, last.num_prompt_tokens - run.prior_tokens)
        return FINISHED, codec.done_fields(finish_reason=reason, prompt_tokens=prompt_tokens,
                                           completion_tokens=run.next_seq,
                                           cached_tokens=min(last.num_cached_tokens, prompt_tokens))

    def _execute(self, writes: list[Write]) -> list[int]:
        """The fenced append, retried while Redis is unreachable (a restart). A retried
        call may repeat a token entry, which readers skip by seq; a terminal entry is
        never repeated (the script knows its own attempt's end)."""
        deadline = time.monotonic() + REDIS_RETRY_SECONDS
        delay = 0.05
        while True:
            try:
                return stream_log.append(writes)
            except (redis.ConnectionError, redis.TimeoutError):
                if time.monotonic() > deadline:
                    raise
                log.warning("redis unreachable; retrying the step write in %.2f s", delay)
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
