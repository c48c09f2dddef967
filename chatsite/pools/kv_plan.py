"""KV capacity planner: what one GPU holds for a model, from its config.json alone.

Per-token KV bytes = 2 (K and V) x layers x kv_heads x head_dim x bytes per value.
Memory left for KV = GPU memory - weights - overhead (activations, runtime).
A decode step must at least stream every weight once, so weights / bandwidth
is its floor; a full batch also reads every running sequence's KV.

Pure Python: the web tier (admin, management command) uses it; no torch, no vLLM.
"""
import json
from dataclasses import dataclass
from pathlib import Path

GiB = 2**30
PRESETS_DIR = Path(__file__).resolve().parent / "presets"

DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}
# Bytes per KV value for each kv_cache_dtype ("auto" follows the model dtype).
KV_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
# Bytes per weight under a quantization scheme (scales and zero points ignored).
QUANT_WEIGHT_BYTES = {
    "fp8": 1, "fp8_per_tensor": 1, "fp8_per_channel": 1, "fp8_per_block": 1, "fbgemm_fp8": 1, "mxfp8": 1,
    "int8_per_channel_weight_only": 1, "experts_int8": 1,
    "awq": 0.5, "auto_awq": 0.5, "awq_marlin": 0.5, "gptq": 0.5, "auto_gptq": 0.5, "gptq_marlin": 0.5,
    "nvfp4_per_token": 0.5, "mxfp4": 0.5, "modelopt_fp4": 0.5,
}


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_bytes: int
    bandwidth_bytes_per_s: float


# Datasheet figures: HBM capacity and bandwidth.
GPUS = {
    "h100-sxm-80gb": Gpu("NVIDIA H100 SXM 80GB", 80 * GiB, 3.35e12),
    "a100-sxm-80gb": Gpu("NVIDIA A100 SXM 80GB", 80 * GiB, 2.039e12),
    "l4-24gb": Gpu("NVIDIA L4 24GB", 24 * GiB, 0.3e12),
}


class PlanError(ValueError):
    """The config cannot be planned (a field is missing or makes no sense)."""


@dataclass(frozen=True)
class ModelShape:
    """The few config.json fields KV sizing needs."""

    num_hidden_layers: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int
    num_parameters: int
    dtype: str

    @classmethod
    def from_config(cls, config: dict) -> "ModelShape":
        try:
            hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
            heads = int(config["num_attention_heads"])
            kv_heads = int(config.get("num_key_value_heads") or heads)
            head_dim = int(config.get("head_dim") or hidden // heads)
            max_pos = int(config["max_position_embeddings"])
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanError(f"config.json lacks a usable field: {exc}") from exc
        dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
        return cls(layers, kv_heads, head_dim, max_pos, parameter_count(config), dtype)


def parameter_count(config: dict) -> int:
    """Parameters of a Llama-shaped decoder (embeddings, attention, gated MLP, norms)."""
    hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    vocab, inter = int(config.get("vocab_size", 0)), int(config.get("intermediate_size", 4 * hidden))
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    per_layer = attention + 3 * hidden * inter + 2 * hidden
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)
    return embeddings + layers * per_layer + hidden


@dataclass(frozen=True)
class KvPlan:
    gpu: Gpu
    kv_bytes_per_token: int
    max_position_embeddings: int
    full_window_kv_bytes: int
    weights_bytes: int
    overhead_bytes: int
    kv_budget_bytes: int
    kv_tokens: int
    chat_context: int
    concurrent_chats: int
    decode_step_floor_s: float
    full_batch_step_floor_s: float

    def as_dict(self) -> dict:
        return {"gpu": self.gpu.name, "gpu_memory_gib": self.gpu.memory_bytes / GiB,
                "gpu_bandwidth_tb_s": self.gpu.bandwidth_bytes_per_s / 1e12,
                **{k: v for k, v in self.__dict__.items() if k != "gpu"}}


def kv_bytes_per_value(shape: ModelShape, kv_cache_dtype: str = "auto") -> int:
    name = shape.dtype if kv_cache_dtype in ("auto", None) else kv_cache_dtype
    if name not in KV_DTYPE_BYTES:
        raise PlanError(f"unknown KV cache dtype {name!r}")
    return KV_DTYPE_BYTES[name]


def weights_bytes_estimate(shape: ModelShape, *, dtype: str | None = None, quantization: str | None = None) -> int:
    """Weight memory from the parameter count: quantized bytes if a scheme is set, else the dtype's."""
    if quantization:
        per = QUANT_WEIGHT_BYTES.get(quantization)
        if per is None:
            raise PlanError(f"no weight size known for quantization {quantization!r}")
    else:
        name = shape.dtype if dtype in (None, "auto") else dtype
        if name not in DTYPE_BYTES:
            raise PlanError(f"unknown weight dtype {name!r}")
        per = DTYPE_BYTES[name]
    return int(shape.num_parameters * per)


def weights_bytes_for(shape: ModelShape, model: str | Path, *, dtype: str | None = None,
                      quantization: str | None = None) -> int:
    """Weight memory of a pool: a checkpoint quantized ahead weighs what its files weigh
    (bits, scales and all); otherwise parameters x the bytes of the dtype or scheme."""
    folder = Path(model)
    config = folder / "config.json"
    if quantization is None and config.is_file() and "quantization_config" in json.loads(config.read_text()):
        files = list(folder.glob("*.safetensors")) or list(folder.glob("*.bin"))
        if files:
            return sum(f.stat().st_size for f in files)
    return weights_bytes_estimate(shape, dtype=dtype, quantization=quantization)


def kv_plan(shape: ModelShape, gpu: Gpu, *, weights_bytes: int, kv_cache_dtype: str = "auto",
            overhead_bytes: int = 4 * GiB, chat_context: int = 8192) -> KvPlan:
    """Tokens and chats the GPU's KV memory holds, and the bandwidth floor of a decode step.

    Raises PlanError when the weights and overhead leave no memory for KV."""
    per_token = 2 * shape.num_hidden_layers * shape.num_key_value_heads * shape.head_dim \
        * kv_bytes_per_value(shape, kv_cache_dtype)
    budget = gpu.memory_bytes - weights_bytes - overhead_bytes
    if budget <= 0:
        raise PlanError(f"{weights_bytes / GiB:.1f} GiB of weights and {overhead_bytes / GiB:.1f} GiB of "
                        f"overhead leave no KV memory on a {gpu.name}")
    tokens = budget // per_token
    chats = tokens // chat_context
    batch_kv = chats * chat_context * per_token  # every running chat's KV, read once per step
    return KvPlan(gpu, per_token, shape.max_position_embeddings, per_token * shape.max_position_embeddings,
                  weights_bytes, overhead_bytes, budget, tokens, chat_context, chats,
                  weights_bytes / gpu.bandwidth_bytes_per_s,
                  (weights_bytes + batch_kv) / gpu.bandwidth_bytes_per_s)


def load_config(source: str | Path) -> dict:
    """config.json from a model folder, a file path, or a preset name (see presets/)."""
    path = Path(source)
    if path.is_dir():
        path = path / "config.json"
    elif not path.exists() and (PRESETS_DIR / f"{source}.json").is_file():
        path = PRESETS_DIR / f"{source}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PlanError(f"no readable config.json for {str(source)!r}: {exc}") from exc


def presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.json"))


def size(num_bytes: float) -> str:
    """Bytes in the largest binary unit that keeps the figure >= 1 (16.00 GiB, 128 KiB)."""
    for unit, scale in (("GiB", GiB), ("MiB", 2**20), ("KiB", 1024)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.2f} {unit}".replace(".00 ", " ")
    return f"{num_bytes:.0f} B"


def duration(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


def format_plan(plan: KvPlan, *, kv_cache_dtype: str = "auto") -> list[str]:
    """Human-readable lines, the same on the console and the admin page."""
    return [
        f"GPU: {plan.gpu.name}, {size(plan.gpu.memory_bytes)} at {plan.gpu.bandwidth_bytes_per_s / 1e12:.2f} TB/s",
        f"KV per token ({kv_cache_dtype}): {plan.kv_bytes_per_token:,} B = {size(plan.kv_bytes_per_token)}",
        f"one request at the full {plan.max_position_embeddings:,}-token window: "
        f"{size(plan.full_window_kv_bytes)} of KV",
        f"memory left for KV: {size(plan.gpu.memory_bytes)} - {size(plan.weights_bytes)} (weights) - "
        f"{size(plan.overhead_bytes)} (overhead) = {size(plan.kv_budget_bytes)}",
        f"KV capacity: {plan.kv_tokens:,} tokens = {plan.concurrent_chats:,} concurrent chats at "
        f"{plan.chat_context:,} tokens",
        f"decode step bandwidth floor: {duration(plan.decode_step_floor_s)} (weights only, "
        f"{1 / plan.decode_step_floor_s:,.0f} steps/s); {duration(plan.full_batch_step_floor_s)} with "
        f"a full batch's KV",
    ]
