"""The engine host: one engine backend on one asyncio loop thread, many requests.

Callers on any thread `submit()` requests and `abort()` them by id. Every output
the backend produces is collected per loop iteration, so all requests' new text
of one engine step reaches `on_step` in a single call; the sink (workers/) turns
that into one pipelined Redis round trip.
"""
import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Protocol

from inference.prompt import PromptPlan, assemble
from inference.types import Chunk, EngineStats, GenerationRequest, StepDelta

log = logging.getLogger(__name__)


class EngineBackend(Protocol):
    """What the host needs from an engine (vLLM, or the fake one for tests)."""

    tokenizer: object

    async def start(self) -> None: ...

    def stream(self, request: GenerationRequest):  # -> AsyncIterator[Chunk]
        ...

    async def abort(self, request_id: str) -> None: ...

    def stats(self) -> EngineStats: ...

    async def shutdown(self) -> None: ...


class EngineHost:
    """Owns one engine; serves many concurrent requests from many threads."""

    def __init__(self, backend: EngineBackend, on_step: Callable[[list[StepDelta]], None], *, name: str = "engine"):
        self._backend = backend
        self._on_step = on_step
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"{name}-loop", daemon=True)
        self._pending: list[StepDelta] = []
        self._flush_scheduled = False
        self._tasks: dict[str, asyncio.Task] = {}
        self._tokenizer_lock = threading.Lock()
        self.ready = False

    # --- lifecycle ---------------------------------------------------------
    def start(self, timeout: float = 900) -> None:
        """Start the loop thread and the engine; blocks until the engine is ready."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._backend.start(), self._loop).result(timeout)
        self.ready = True

    def shutdown(self, timeout: float = 30) -> None:
        """Abort what runs, stop the engine and the loop."""
        if not self._thread.is_alive():
            return
        self.ready = False
        try:
            asyncio.run_coroutine_threadsafe(self._backend.shutdown(), self._loop).result(timeout)
        except Exception:  # shutting down anyway
            log.exception("engine shutdown failed")
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)

    # --- requests ----------------------------------------------------------
    def build_prompt(self, messages: list[dict], *, max_prompt_tokens: int, continuation: str = "") -> PromptPlan:
        """The prompt for `messages` through the model's chat template, newest turns
        that fit first; raises inference.prompt.PromptTooLong if even the last does not."""
        with self._tokenizer_lock:  # a fast tokenizer must not be used from two threads at once
            return assemble(self._backend.tokenizer, messages,
                            max_prompt_tokens=max_prompt_tokens, continuation=continuation)

    def submit(self, request: GenerationRequest) -> None:
        """Queue a request; its output arrives at `on_step`, ending with a finished delta."""
        self._loop.call_soon_threadsafe(self._spawn, request)

    def abort(self, request_id: str) -> None:
        """Abort a request (its KV blocks are freed); a finished delta with reason 'abort' follows."""
        asyncio.run_coroutine_threadsafe(self._backend.abort(request_id), self._loop)

    def stats(self) -> EngineStats:
        stats = self._backend.stats()
        stats.ready = self.ready
        return stats

    @property
    def num_active(self) -> int:
        return len(self._tasks)

    # --- the loop thread ---------------------------------------------------
    def _spawn(self, request: GenerationRequest) -> None:
        self._tasks[request.request_id] = self._loop.create_task(self._consume(request))

    async def _consume(self, request: GenerationRequest) -> None:
        rid = request.request_id
        try:
            async for chunk in self._backend.stream(request):
                self._emit(_delta(rid, chunk))
                if chunk.finished:
                    return
            self._emit(StepDelta(rid, "", 0, finished=True, finish_reason="abort"))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the engine failed this request: the sink writes an error entry
            log.exception("request %s failed in the engine", rid)
            self._emit(StepDelta(rid, "", 0, finished=True, error=f"{type(exc).__name__}: {exc}"))
        finally:
            self._tasks.pop(rid, None)

    def _emit(self, delta: StepDelta) -> None:
        # Outputs of one engine step wake their consumers in the same loop
        # iteration; flushing on the next one hands the whole step over at once.
        self._pending.append(delta)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        self._flush_scheduled = False
        try:
            self._on_step(batch)
        except Exception:
            log.exception("step sink failed")


def _delta(request_id: str, chunk: Chunk) -> StepDelta:
    return StepDelta(request_id, chunk.text, chunk.num_tokens, chunk.finished,
                     chunk.finish_reason, chunk.num_prompt_tokens)
