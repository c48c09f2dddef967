"""The engine host: one engine backend on one asyncio loop thread, many requests.

Callers on any thread `submit()` requests and `abort()` them by id. A backend pushes
each request's output to the host as the engine produces it (no task per request);
everything pushed in one loop iteration, i.e. one engine step of all requests,
reaches `on_step` in a single call, which the sink (workers/) turns into one Redis
round trip.
"""
import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Protocol

from inference import token_prefix
from inference.prompt import PromptPlan, assemble, encode_raw
from inference.token_prefix import TokenRecord
from inference.types import (REFUSED_PREFIX, Chunk, DetailStepDelta, EngineStats, GenerationRequest, RequestRefused,
                             StepDelta)

log = logging.getLogger(__name__)

Emit = Callable[[Chunk], None]


class EngineBackend(Protocol):
    """What the host needs from an engine (vLLM, or the fake one for tests)."""

    tokenizer: object

    async def start(self) -> None: ...

    async def add(self, request: GenerationRequest, emit: Emit) -> None:
        """Start generating; `emit(chunk)` is then called on the loop thread for every
        output of the request, the last one with `finished` set (reason "abort" after
        an abort, `error` when the engine failed it). Raises RequestRefused if the
        request itself is at fault (a bad grammar, a token id out of vocabulary), any
        other exception if the engine cannot take it."""

    async def abort(self, request_id: str) -> None: ...

    def constraint_problem(self, json_schema: str, *, budget_seconds: float) -> str | None:
        """None if the engine can constrain a reply to this JSON Schema (text), else why
        not, in words for the client. Called on a caller's thread, never the loop's;
        blocks at most about `budget_seconds`."""

    def stats(self) -> EngineStats: ...

    async def shutdown(self) -> None: ...


class EngineHost:
    """Owns one engine; serves many concurrent requests from many threads."""

    def __init__(self, backend: EngineBackend, on_step: Callable[[list[StepDelta]], None], *, name: str = "engine",
                 chat_template: str | None = None):
        self._backend = backend
        self._chat_template = chat_template  # the pool's own, over the tokenizer's (None: the tokenizer's)
        self._on_step = on_step
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"{name}-loop", daemon=True)
        self._pending: list[StepDelta] = []
        self._flush_scheduled = False
        self._active: set[str] = set()
        self._tokenizer_lock = threading.Lock()
        self._token_salt: str | None = None
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
    def build_prompt(self, messages: list[dict], *, max_prompt_tokens: int, continuation: str = "",
                     carried: str = "", tools: list[dict] | None = None,
                     add_generation_prompt: bool = True, known: TokenRecord | None = None) -> PromptPlan:
        """The prompt for `messages` (and `tools`, function definitions) through the
        pool's chat template, newest turns that fit first; raises
        inference.prompt.PromptTooLong if even the last does not. `known`: the record of
        the reply the messages build on, whose ids start the prompt when they spell its
        start (inference.token_prefix.extend); else the whole prompt is tokenized."""
        with self._tokenizer_lock:  # a fast tokenizer must not be used from two threads at once
            if known is not None:
                plan = token_prefix.extend(self._backend.tokenizer, messages, known,
                                           max_prompt_tokens=max_prompt_tokens, salt=self._salt(),
                                           continuation=continuation, carried=carried,
                                           chat_template=self._chat_template, tools=tools,
                                           add_generation_prompt=add_generation_prompt)
                if plan is not None:
                    return plan
            return assemble(self._backend.tokenizer, messages, max_prompt_tokens=max_prompt_tokens,
                            continuation=continuation, carried=carried, chat_template=self._chat_template,
                            tools=tools, add_generation_prompt=add_generation_prompt)

    def build_raw_prompt(self, text: str, *, max_prompt_tokens: int, carried: str = "",
                         token_ids: list[int] | None = None) -> PromptPlan:
        """The prompt for `text` as it is (no chat template), or `token_ids` as they are;
        raises PromptTooLong if it does not fit."""
        with self._tokenizer_lock:
            return encode_raw(self._backend.tokenizer, text, max_prompt_tokens=max_prompt_tokens, carried=carried,
                              token_ids=token_ids)

    def token_record(self, plan: PromptPlan, output_ids: list[int]) -> TokenRecord | None:
        """The record of a reply: `plan`'s ids (a chat prompt's) and the ids the engine
        generated after them; None for a prompt with no text (a raw or token-id prompt)."""
        if not plan.text:
            return None
        with self._tokenizer_lock:
            return token_prefix.record(self._backend.tokenizer, prompt_ids=plan.token_ids, prompt_text=plan.text,
                                       output_ids=output_ids, salt=self._salt(), dropped=plan.num_messages_dropped)

    def _salt(self) -> str:
        if self._token_salt is None:  # the tokenizer is the engine's, there once it started
            self._token_salt = token_prefix.salt(self._backend.tokenizer, self._chat_template)
        return self._token_salt

    def decode(self, token_ids: list[int]) -> str:
        """The text of `token_ids` (a prompt sent as token ids, echoed back)."""
        with self._tokenizer_lock:
            return self._backend.tokenizer.decode(token_ids)

    def submit(self, request: GenerationRequest) -> None:
        """Queue a request; its output arrives at `on_step`, ending with a finished delta."""
        self._loop.call_soon_threadsafe(self._add, request)

    def abort(self, request_id: str) -> None:
        """Abort a request (its KV blocks are freed); a finished delta with reason 'abort' follows."""
        asyncio.run_coroutine_threadsafe(self._backend.abort(request_id), self._loop)

    def constraint_problem(self, json_schema: str, *, budget_seconds: float) -> str | None:
        """The backend's answer: whether the engine can take this constraint (see EngineBackend)."""
        return self._backend.constraint_problem(json_schema, budget_seconds=budget_seconds)

    def stats(self) -> EngineStats:
        stats = self._backend.stats()
        stats.ready = self.ready
        return stats

    @property
    def num_active(self) -> int:
        return len(self._active)

    # --- the loop thread ---------------------------------------------------
    def _add(self, request: GenerationRequest) -> None:
        self._active.add(request.request_id)
        self._loop.create_task(self._start_request(request))

    async def _start_request(self, request: GenerationRequest) -> None:
        rid = request.request_id
        emit = self._emitter(rid)
        try:
            await self._backend.add(request, emit)
        except RequestRefused as exc:  # the request's own fault: the sink says so
            log.info("request %s was refused by the engine: %s", rid, exc)
            emit(Chunk("", 0, finished=True, error=f"{REFUSED_PREFIX}{exc}"))
        except Exception as exc:  # failed in the engine: the sink writes an error entry
            log.exception("request %s failed in the engine", rid)
            emit(Chunk("", 0, finished=True, error=f"{type(exc).__name__}: {exc}"))

    def _emitter(self, rid: str) -> Emit:
        active = self._active

        def emit(chunk: Chunk) -> None:
            if rid not in active:
                return  # it ended already; nothing more goes to the sink
            if chunk.finished:
                active.discard(rid)
            if type(chunk) is Chunk:
                self._pending.append(StepDelta(rid, chunk.text, chunk.num_tokens, chunk.finished,
                                               chunk.finish_reason, chunk.num_prompt_tokens, chunk.error,
                                               chunk.num_cached_tokens, chunk.output_token_ids))
            else:
                self._pending.append(DetailStepDelta(rid, chunk.text, chunk.num_tokens, chunk.finished,
                                                     chunk.finish_reason, chunk.num_prompt_tokens, chunk.error,
                                                     chunk.num_cached_tokens, chunk.output_token_ids,
                                                     chunk.logprobs, chunk.token_ids, chunk.prompt_logprobs))
            # Outputs of one engine step arrive in the same loop iteration; flushing on
            # the next one hands the whole step over at once.
            if not self._flush_scheduled:
                self._flush_scheduled = True
                self._loop.call_soon(self._flush)

        return emit

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        self._flush_scheduled = False
        try:
            self._on_step(batch)
        except Exception:
            log.exception("step sink failed")
