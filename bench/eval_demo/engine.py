"""A demo pool's real engine, driven as a worker drives it, for the evaluation.

The engine is the worker's: inference.engine_host.EngineHost over
inference.vllm_backend.VllmBackend, built from the pool's pinned engine arguments;
each prompt is one fresh chat's first turn, rendered by the pool's chat template
(EngineHost.build_prompt, as workers/generation.py does). Its sampling is what the door
admits (chatsite.runs.validation.clean_sampling: the client's values over the pool's
defaults) and reaches vLLM through the worker's own engine_request. No Redis, Postgres
or HTTP: what the platform adds around the engine does not change the text.
"""
import itertools
import threading
from dataclasses import dataclass

from chatsite.runs.models import GenerationRun
from chatsite.runs.validation import Sampling
from inference import chat_templates
from inference.engine_config import DEMO_CONTEXT_LENGTH, DEMO_POOL_ENGINE_ARGS
from inference.engine_host import EngineHost
from inference.types import StepDelta
from workers.generation import engine_request

PROGRESS_SECONDS = 60


@dataclass(frozen=True)
class Ask:
    text: str  # the user's message, a fresh chat's first
    sampling: Sampling  # as the door admitted it (its seed fresh per ask)


@dataclass
class Reply:
    text: str = ""
    tokens: int = 0
    finish_reason: str | None = None
    error: str | None = None


class PoolEngine:
    """One demo pool's engine; `run(asks)` answers many asks at once (all in flight)."""

    def __init__(self, *, pool: str, model_dir: str, chat_template: str):
        from inference.specs import EngineSpec
        from inference.vllm_backend import VllmBackend

        spec = EngineSpec.build(pool=pool, model=model_dir, context_length=DEMO_CONTEXT_LENGTH,
                                engine_args=DEMO_POOL_ENGINE_ARGS[pool])
        self._host = EngineHost(VllmBackend(spec), self._on_step, name=pool,
                                chat_template=chat_templates.read(chat_template))
        self._replies: dict[str, Reply] = {}
        self._left = 0
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._name = pool

    def start(self) -> None:
        self._host.start()

    def shutdown(self) -> None:
        self._host.shutdown()

    def _on_step(self, deltas: list[StepDelta]) -> None:
        with self._lock:
            for d in deltas:
                reply = self._replies[d.request_id]
                reply.text += d.text
                reply.tokens += d.num_tokens
                if d.finished:
                    reply.finish_reason, reply.error = d.finish_reason, d.error
                    self._left -= 1
            if self._left == 0:
                self._done.set()

    def run(self, asks: list[Ask]) -> list[Reply]:
        """Every ask's reply, in order; blocks until all have finished."""
        if not asks:
            return []
        ids, requests = [], []
        for ask in asks:
            rid, s = f"eval-{next(self._ids)}", ask.sampling
            plan = self._host.build_prompt([{"role": "user", "content": ask.text}],
                                           max_prompt_tokens=DEMO_CONTEXT_LENGTH - s.max_tokens)
            run = GenerationRun(sampling=s.as_run_sampling(), seed=s.seed, max_tokens=s.max_tokens,
                                tier=GenerationRun.Tier.INTERACTIVE)  # never saved: the worker's view of it
            ids.append(rid)
            requests.append(engine_request(run, request_id=rid, prompt_token_ids=plan.token_ids,
                                           max_tokens=s.max_tokens))
        with self._lock:
            self._replies.update((rid, Reply()) for rid in ids)
            self._left += len(ids)
            self._done.clear()
        for r in requests:
            self._host.submit(r)
        while not self._done.wait(PROGRESS_SECONDS):
            print(f"[{self._name}] {len(ids) - self._left} of {len(ids)} replies done", flush=True)
        with self._lock:
            return [self._replies.pop(rid) for rid in ids]
