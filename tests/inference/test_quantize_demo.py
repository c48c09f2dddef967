"""The locally made quantized checkpoints: every decoder Linear quantized within half a
quantization step, and the pool settings that serve them accepted."""
import json

import pytest
import torch
from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
from safetensors.torch import load_file

from inference.engine_config import TINY_ENGINE_ARGS
from inference.engine_config import engine_config_problems
from inference.quantize_demo import LINEAR, quantize_checkpoint


@pytest.fixture(scope="module")
def flagship():
    from django.conf import settings

    return settings.CHATSITE["DEMO_MODELS_DIR"] / "flagship"


@pytest.mark.parametrize("scheme,bits", [("w8a8-int8", 8), ("w4a16", 4)])
def test_rtn_checkpoint_reconstructs_every_linear_within_half_a_step(flagship, tmp_path, scheme, bits):
    out = quantize_checkpoint(flagship, tmp_path / scheme, scheme)
    original, quantized = load_file(str(flagship / "model.safetensors")), load_file(str(out / "model.safetensors"))
    linear = [n for n in original if n.endswith(".weight") and n.split(".")[-2] in LINEAR]
    assert len(linear) == 7 * json.loads((flagship / "config.json").read_text())["num_hidden_layers"]
    for name in linear:
        prefix, w = name[:-len("weight")], original[name].float()
        scale = quantized[prefix + "weight_scale"].float()
        if bits == 4:
            q = unpack_from_int32(quantized[prefix + "weight_packed"], 4, torch.Size(w.shape))
            restored = (q.float().view(w.shape[0], -1, 32) * scale.unsqueeze(-1)).view(w.shape)
            step = scale.repeat_interleave(32, dim=1)
        else:
            q = quantized[prefix + "weight"]
            restored, step = q.float() * scale, scale.expand_as(w)
        assert q.dtype == torch.int8 and int(q.abs().max()) <= 2 ** (bits - 1)
        # half a step of rounding, plus the scale's own rounding when it is stored in bfloat16
        scale_rounding = (q.abs().float() + 1) * step * (2**-8 if bits == 4 else 0)
        assert torch.all((restored - w).abs() <= step / 2 + scale_rounding + 1e-6), name
        assert not torch.equal(restored, w)  # it really is quantized
    config = json.loads((out / "config.json").read_text())
    assert config["quantization_config"]["quant_method"] == "compressed-tensors"
    args = {**TINY_ENGINE_ARGS, "dtype": "bfloat16", "quantization": "compressed-tensors"}
    assert engine_config_problems(model=str(out), context_length=1024, engine_args=args, device="cpu") == []
    problems = engine_config_problems(model=str(out), context_length=1024,
                                      engine_args={**args, "quantization": "awq"}, device="gpu")
    assert any("was quantized with 'compressed-tensors'" in p.message for p in problems)
