"""Quantized copies of a demo model, made here (no hub): compressed-tensors checkpoints.

vLLM's CPU build has kernels for INT8 W8A8 (oneDNN) and for 4-bit weight-only
W4A16 (its WNA16 kernel), but those read weights quantized ahead of time. This
module writes such checkpoints from a float demo model with round-to-nearest
quantization (no calibration data, unlike GPTQ/AWQ; a fair worst case for the
quality gate): every Linear layer of the decoder, the embeddings and lm_head kept.

    .venv/bin/python -m inference.quantize_demo var/models/flagship var/models/flagship-w8a8 w8a8-int8
"""
import json
import shutil
import sys
from pathlib import Path

LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
SCHEMES = {
    # INT8 weights per output channel, INT8 activations per token computed at run time.
    "w8a8-int8": {"format": "int-quantized",
                  "weights": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel",
                              "dynamic": False},
                  "input_activations": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token",
                                        "dynamic": True}},
    # 4-bit weights in groups of 32 input channels, activations stay bfloat16.
    "w4a16": {"format": "pack-quantized",
              "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 32,
                          "dynamic": False},
              "input_activations": None},
}


def _quantize(weight, num_bits: int, group_size: int | None):
    """Symmetric round-to-nearest: (int8 values, float scales) with weight ~= values * scale."""
    import torch

    qmax = 2 ** (num_bits - 1) - 1
    w = weight.float()
    rows, cols = w.shape
    groups = w.view(rows, cols // group_size, group_size) if group_size else w.view(rows, 1, cols)
    scale = (groups.abs().amax(dim=-1, keepdim=True) / qmax).clamp_min(1e-8)
    q = torch.round(groups / scale).clamp(-qmax - 1, qmax).to(torch.int8).view(rows, cols)
    return q, scale.squeeze(-1)


def quantize_checkpoint(src: Path, dst: Path, scheme: str) -> Path:
    """Write `src` (a float safetensors model folder) quantized with `scheme` into `dst`."""
    import torch
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32
    from safetensors.torch import load_file, save_file

    spec = SCHEMES[scheme]
    src, dst = Path(src), Path(dst)
    tmp = dst.with_name(f".{dst.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    tensors = load_file(str(src / "model.safetensors"))
    bits, group = spec["weights"]["num_bits"], spec["weights"].get("group_size")
    out = {}
    for name, tensor in tensors.items():
        if not (name.endswith(".weight") and name.split(".")[-2] in LINEAR):
            out[name] = tensor.to(torch.bfloat16)
            continue
        prefix = name[: -len("weight")]
        q, scale = _quantize(tensor, bits, group)
        if spec["format"] == "pack-quantized":
            out[prefix + "weight_packed"] = pack_to_int32(q, bits)
            out[prefix + "weight_shape"] = torch.tensor(tensor.shape)
            out[prefix + "weight_scale"] = scale.to(torch.bfloat16)
        else:
            out[prefix + "weight"] = q
            out[prefix + "weight_scale"] = scale.to(torch.float32)
    (tmp / "model.safetensors").unlink()
    save_file(out, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((src / "config.json").read_text())
    config["torch_dtype"] = config["dtype"] = "bfloat16"
    config["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": spec["format"], "quantization_status": "compressed",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": spec["weights"],
                                      "input_activations": spec["input_activations"],
                                      "output_activations": None}},
        "ignore": ["lm_head"], "kv_cache_scheme": None,
    }
    (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (tmp / "build.json").write_text(json.dumps({"source": str(src), "scheme": scheme}) + "\n")
    shutil.rmtree(dst, ignore_errors=True)
    tmp.rename(dst)
    return dst


if __name__ == "__main__":
    print(quantize_checkpoint(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]))
