"""The KV capacity planner reproduces the seed's Llama 3.1 8B / H100 figures from config.json."""
import json
from io import StringIO

from django.core.management import call_command

from chatsite.pools.kv_plan import GPUS, GiB, ModelShape, kv_plan, load_config, parameter_count, weights_bytes_estimate

LLAMA = "llama-3.1-8b-instruct"


def _seed_plan(kv_cache_dtype="auto"):
    config = load_config(LLAMA)
    return kv_plan(ModelShape.from_config(config), GPUS["h100-sxm-80gb"], weights_bytes=16 * GiB,
                   overhead_bytes=4 * GiB, kv_cache_dtype=kv_cache_dtype, chat_context=8192)


def test_seed_figures_for_llama_31_8b_on_an_h100():
    plan = _seed_plan()
    assert plan.kv_bytes_per_token == 131_072  # 2 x 32 layers x 8 KV heads x 128 dims x 2 bytes = 128 KiB
    assert plan.full_window_kv_bytes == 16 * GiB  # one request at 131,072 tokens: as large as the weights
    assert plan.kv_budget_bytes == 60 * GiB
    assert plan.kv_tokens == 491_520  # "~491k tokens"
    assert plan.concurrent_chats == 60  # "~60 conversations at 8K"
    assert round(plan.decode_step_floor_s * 1e3) == 5  # 16 GiB / 3.35 TB/s: "about 5 ms per token"
    assert 190 <= 1 / plan.decode_step_floor_s <= 200  # "around 200 steps per second"


def test_fp8_kv_doubles_tokens_and_chats():
    bf16, fp8 = _seed_plan(), _seed_plan("fp8")
    assert fp8.kv_bytes_per_token * 2 == bf16.kv_bytes_per_token
    assert fp8.kv_tokens == 2 * bf16.kv_tokens and fp8.concurrent_chats == 2 * bf16.concurrent_chats
    assert fp8.decode_step_floor_s == bf16.decode_step_floor_s  # the weights did not shrink


def test_parameter_count_from_config_matches_the_published_8b():
    config = load_config(LLAMA)
    assert parameter_count(config) == 8_030_261_248
    assert weights_bytes_estimate(ModelShape.from_config(config)) == 2 * 8_030_261_248
    assert weights_bytes_estimate(ModelShape.from_config(config), quantization="awq") == 8_030_261_248 // 2


def test_demo_flagship_per_token_kv_from_its_own_config(settings):
    shape = ModelShape.from_config(load_config(settings.CHATSITE["DEMO_MODELS_DIR"] / "flagship"))
    per_token = kv_plan(shape, GPUS["l4-24gb"], weights_bytes=0).kv_bytes_per_token
    assert per_token == 2 * shape.num_hidden_layers * shape.num_key_value_heads * shape.head_dim * 4  # float32


def test_the_command_prints_the_seed_figures_by_default():
    out = StringIO()
    call_command("kv_plan", stdout=out)
    text = out.getvalue()
    assert "131,072 B = 128 KiB" in text
    assert "131,072-token window: 16 GiB" in text
    assert "491,520 tokens = 60 concurrent chats at 8,192 tokens" in text
    assert "decode step bandwidth floor: 5.13 ms" in text


def test_the_command_takes_a_gpu_and_kv_dtype_and_prints_json():
    out = StringIO()
    call_command("kv_plan", "--model", LLAMA, "--kv-dtype", "fp8", "--memory-gib", "40", "--json", stdout=out)
    figures = json.loads(out.getvalue())
    assert figures["kv_bytes_per_token"] == 65_536
    assert figures["kv_tokens"] == (40 - 16 - 4) * GiB // 65_536


def test_the_command_plans_a_pool_with_its_own_kv_dtype(db, settings):
    from tests.factories import PoolFactory

    PoolFactory(name="fp8-pool", model=str(settings.CHATSITE["DEMO_MODELS_DIR"] / "flagship"),
                engine_args={"kv_cache_dtype": "fp8"})
    out = StringIO()
    call_command("kv_plan", "--pool", "fp8-pool", "--gpu", "l4-24gb", "--json", stdout=out)
    figures = json.loads(out.getvalue())
    assert figures["kv_bytes_per_token"] == 512  # 2 x 4 layers x 2 KV heads x 32 dims x 1 byte
    assert figures["chat_context"] == 1024  # the model's window, not 8K
    assert figures["kv_tokens"] == figures["kv_budget_bytes"] // 512


def test_a_checkpoint_quantized_ahead_weighs_what_its_files_weigh(tmp_path, settings):
    from chatsite.pools.kv_plan import weights_bytes_for
    from inference.quantize_demo import quantize_checkpoint

    flagship = settings.CHATSITE["DEMO_MODELS_DIR"] / "flagship"
    w4 = quantize_checkpoint(flagship, tmp_path / "w4", "w4a16")
    shape = ModelShape.from_config(load_config(w4))
    assert weights_bytes_for(shape, w4) == (w4 / "model.safetensors").stat().st_size
    assert weights_bytes_for(shape, w4) < weights_bytes_for(shape, flagship, dtype="bfloat16")
    assert weights_bytes_for(shape, flagship, dtype="float32") == shape.num_parameters * 4
