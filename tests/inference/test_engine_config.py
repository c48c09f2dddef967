"""Engine settings a worker could not start are refused by inference.engine_config, the
one module the web tier (pool save) and the worker (EngineSpec.build) both call, with
the reason; good lever settings pass."""
import json
import os
import shutil

import pytest

from inference.engine_config import (DEMO_POOL_ENGINE_ARGS, ENGINE_ARG_DEFAULTS, TINY_ENGINE_ARGS, engine_config_problems,
                                     host_problems)
from inference.specs import EngineSpec, EngineSpecError

DEMO_ENGINE_ARGS = TINY_ENGINE_ARGS  # the tiny trained models these cases run on


@pytest.fixture(scope="module")
def models(django_db_blocker):
    from django.conf import settings

    return settings.CHATSITE["DEMO_MODELS_DIR"]


@pytest.fixture
def foreign_draft(models, tmp_path):
    """The small model's folder with a tokenizer whose ids mean other text (two tokens swapped)."""
    draft = tmp_path / "foreign-draft"
    shutil.copytree(models / "small", draft)
    data = json.loads((draft / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[100:102]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (draft / "tokenizer.json").write_text(json.dumps(data))
    return draft


NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}


def _draft(path):
    return {"method": "draft_model", "model": str(path), "num_speculative_tokens": 4}


# (case, overrides, context_length, device, field blamed, words in the reason)
BAD = [
    ("cpu block size", {"block_size": 16}, 1024, "cpu", "engine_args", "multiple of 32"),
    ("context past the window", {}, 2048, "cpu", "context_length", "max_position_embeddings (1024)"),
    ("unknown scheme", {"quantization": "int3_magic", "dtype": "bfloat16"}, 1024, "cpu", "engine_args",
     "unknown quantization scheme"),
    ("gpu-only scheme on cpu", {"quantization": "fp8", "dtype": "bfloat16"}, 1024, "cpu", "engine_args",
     "accepted only for GPU pools"),
    ("unmeasured scheme on cpu", {"quantization": "awq", "dtype": "bfloat16"}, 1024, "cpu", "engine_args",
     "not among the schemes that run on the CPU build"),
    ("quantization over float32", {"quantization": "fp8_per_channel"}, 1024, "cpu", "engine_args",
     "needs dtype bfloat16 or float16"),
    ("moe-only scheme on a dense model", {"quantization": "int8_per_channel_weight_only", "dtype": "bfloat16"},
     1024, "cpu", "engine_args", "quantizes only MoE expert layers"),
    ("awq without an awq checkpoint", {"quantization": "awq", "dtype": "bfloat16"}, 1024, "gpu", "engine_args",
     "no quantization_config"),
    ("no chunking, budget below context", {"enable_chunked_prefill": False, "max_num_batched_tokens": 512}, 1024,
     "cpu", "engine_args", "without chunked prefill"),
    ("unknown kv dtype", {"kv_cache_dtype": "fp4"}, 1024, "cpu", "engine_args", "kv_cache_dtype 'fp4'"),
    ("ngram lookup backwards", {"speculative_config": {**NGRAM, "prompt_lookup_min": 5}}, 1024, "cpu",
     "engine_args", "prompt_lookup_min <= prompt_lookup_max"),
    ("zero speculative tokens", {"speculative_config": {**NGRAM, "num_speculative_tokens": 0}}, 1024, "cpu",
     "engine_args", "num_speculative_tokens must be"),
    ("unknown speculation method", {"speculative_config": {"method": "telepathy"}}, 1024, "cpu", "engine_args",
     "method 'ngram' or 'draft_model'"),
    ("unknown engine argument", {"max_batch": 3}, 1024, "cpu", "engine_args", "unknown engine argument"),
    ("tensor parallel in one process", {"tensor_parallel_size": 2}, 1024, "gpu", "engine_args",
     "needs distributed_executor_backend 'mp'"),
    ("unknown executor", {"distributed_executor_backend": "ray-ish"}, 1024, "cpu", "engine_args",
     "must be 'uni' or 'mp'"),
    ("compact json, backend auto", {"structured_outputs_config": {"disable_any_whitespace": True}}, 1024, "cpu",
     "engine_args", "disable_any_whitespace needs a backend named"),
    ("unknown grammar backend", {"structured_outputs_config": {"backend": "outlines"}}, 1024, "cpu",
     "engine_args", "backend one of auto, xgrammar, guidance"),
    ("unknown structured key", {"structured_outputs_config": {"whitespace": "none"}}, 1024, "cpu",
     "engine_args", "structured_outputs_config must be an object of backend, disable_any_whitespace"),
]
GOOD = [
    ("demo", {}),
    ("ngram", {"speculative_config": NGRAM}),
    ("fp8 kv", {"kv_cache_dtype": "fp8"}),
    ("fp8 weights", {"dtype": "bfloat16", "quantization": "fp8_per_channel"}),
    ("small chunked-prefill budget", {"max_num_batched_tokens": 128, "max_num_seqs": 16}),
    ("compact json", {"structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True}}),
    ("guidance named alone", {"structured_outputs_config": {"backend": "guidance"}}),
]


@pytest.mark.parametrize("case,overrides,context,device,field,reason", BAD, ids=[b[0] for b in BAD])
def test_bad_settings_are_refused_with_the_reason_by_the_pool_and_the_worker(models, case, overrides, context,
                                                                             device, field, reason):
    problems = engine_config_problems(model=str(models / "flagship"), context_length=context,
                                      engine_args={**DEMO_ENGINE_ARGS, **overrides}, device=device)
    assert any(p.field == field and reason in p.message for p in problems), problems
    with pytest.raises(EngineSpecError, match="cannot start") as refused:
        EngineSpec.build(pool="x", model=str(models / "flagship"), context_length=context,
                         engine_args={**DEMO_ENGINE_ARGS, **overrides}, device=device)
    assert reason in str(refused.value)


@pytest.mark.parametrize("case,overrides", GOOD, ids=[g[0] for g in GOOD])
def test_good_lever_settings_pass_both_checks(models, case, overrides, monkeypatch):
    monkeypatch.setattr("inference.specs.cpu_flags", lambda: frozenset({"avx2", "avx512f"}))  # an FP8 KV host
    args = {**DEMO_ENGINE_ARGS, **overrides}
    assert engine_config_problems(model=str(models / "flagship"), context_length=1024, engine_args=args,
                                  device="cpu") == []
    spec = EngineSpec.build(pool="x", model=str(models / "flagship"), context_length=1024, engine_args=args,
                            device="cpu")
    assert spec.args["block_size"] == 32


def test_the_small_model_may_draft_for_the_flagship_but_a_foreign_tokenizer_may_not(models, foreign_draft):
    ok = {**DEMO_ENGINE_ARGS, "speculative_config": _draft(models / "small")}
    assert engine_config_problems(model=str(models / "flagship"), context_length=1024, engine_args=ok,
                                  device="cpu") == []
    EngineSpec.build(pool="x", model=str(models / "flagship"), context_length=1024, engine_args=ok, device="cpu")
    bad = {**DEMO_ENGINE_ARGS, "speculative_config": _draft(foreign_draft)}
    problems = engine_config_problems(model=str(models / "flagship"), context_length=1024, engine_args=bad,
                                      device="cpu")
    assert [p.field for p in problems] == ["engine_args"] and "another tokenizer" in problems[0].message
    with pytest.raises(EngineSpecError, match="another tokenizer"):
        EngineSpec.build(pool="x", model=str(models / "flagship"), context_length=1024, engine_args=bad,
                         device="cpu")


def test_a_gpu_pool_may_ask_for_what_only_gpus_run(models):
    args = {**DEMO_ENGINE_ARGS, "block_size": 16, "quantization": "fp8", "dtype": "bfloat16"}
    assert engine_config_problems(model=str(models / "flagship"), context_length=1024, engine_args=args,
                                  device="gpu") == []




@pytest.fixture
def smollm_shape(tmp_path):
    """A model folder with SmolLM2-135M's attention shape: 9 heads, 3 KV heads of 64 dims, 30 layers."""
    folder = tmp_path / "smollm-shape"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "hidden_size": 576, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64,
        "num_hidden_layers": 30, "max_position_embeddings": 8192, "vocab_size": 49152}))
    return folder


TP = {"distributed_executor_backend": "mp", "block_size": 16}


@pytest.mark.parametrize("tp,device,reason", [
    (2, "cpu", "a CPU pool serves with tensor_parallel_size 1"),
    (2, "gpu", "does not divide the model's 9 attention heads"),
    (16, "gpu", "more GPUs than one host has"),
])
def test_tensor_parallel_is_refused_when_the_pool_is_saved_with_the_reason(smollm_shape, tp, device, reason):
    problems = engine_config_problems(model=str(smollm_shape), context_length=8192,
                                      engine_args={**TP, "tensor_parallel_size": tp}, device=device)
    assert any(reason in p.message for p in problems), problems


def test_tensor_parallel_that_splits_the_heads_evenly_is_accepted_and_needs_that_many_gpus(models, smollm_shape):
    args = {**DEMO_ENGINE_ARGS, **TP, "tensor_parallel_size": 3}
    assert engine_config_problems(model=str(smollm_shape), context_length=8192, engine_args=args, device="gpu") == []
    four = {**args, "tensor_parallel_size": 4}  # 4 heads and 2 KV heads: each GPU holds one head, KV replicated
    assert engine_config_problems(model=str(models / "flagship"), context_length=1024, engine_args=four,
                                  device="gpu") == []
    full = {**ENGINE_ARG_DEFAULTS, **args}
    assert host_problems(model=str(smollm_shape), context_length=8192, args=full, device="gpu", gpu_count=3,
                         kv_cache_bytes=None) == []
    assert host_problems(model=str(smollm_shape), context_length=8192, args=full, device="gpu", gpu_count=1,
                         kv_cache_bytes=None) == ["tensor_parallel_size 3 needs 3 GPUs; this host has 1"]


def test_the_worker_refuses_a_kv_budget_that_cannot_hold_one_full_context(smollm_shape, monkeypatch):
    args = DEMO_POOL_ENGINE_ARGS["flagship"]  # float32: 2 x 30 layers x 3 KV heads x 64 dims x 4 B = 45 KiB a token
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # 1 GiB = 23,301 tokens: one 8,192-token request fits
    EngineSpec.build(pool="x", model=str(smollm_shape), context_length=8192, engine_args=args, device="cpu")
    problems = host_problems(model=str(smollm_shape), context_length=8192, args={**ENGINE_ARG_DEFAULTS, **args},
                             device="cpu", gpu_count=0, kv_cache_bytes=2**28)
    assert problems == ["a KV cache of 0.25 GiB holds 5825 tokens, less than one request at the context length "
                        "8192 (set VLLM_CPU_KVCACHE_SPACE to at least 1)"]
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "0")
    with pytest.raises(EngineSpecError, match="cannot start: a KV cache of 0.00 GiB"):
        EngineSpec.build(pool="x", model=str(smollm_shape), context_length=8192, engine_args=args, device="cpu")


def test_the_demo_pools_arguments_pass_for_the_real_model_folders():
    from tests.conftest import _real_model_dir

    flagship = _real_model_dir()
    small = flagship.with_name(flagship.name + "-w8a8")
    for name, folder in (("flagship", flagship), ("small", small)):
        assert engine_config_problems(model=str(folder), context_length=8192, engine_args=DEMO_POOL_ENGINE_ARGS[name],
                                      device="cpu") == [], name
    bf32 = {**DEMO_POOL_ENGINE_ARGS["small"], "dtype": "float32"}  # INT8 matmuls need 16-bit activations
    assert any("needs dtype bfloat16" in p.message for p in engine_config_problems(
        model=str(small), context_length=8192, engine_args=bf32, device="cpu"))


def test_the_worker_refuses_an_fp8_kv_cache_on_a_cpu_without_avx512_or_amx(smollm_shape):
    args = {**ENGINE_ARG_DEFAULTS, **DEMO_POOL_ENGINE_ARGS["flagship"], "kv_cache_dtype": "fp8"}

    def problems(flags):
        return host_problems(model=str(smollm_shape), context_length=8192, args=args, device="cpu", gpu_count=0,
                             kv_cache_bytes=None, cpu_flags=flags)

    assert problems(frozenset({"sse4_2", "avx2", "fma"})) == [
        "kv_cache_dtype 'fp8' needs a CPU with AVX-512 or AMX (vLLM's CPU build has no FP8 KV cache without them) "
        "and this host's has neither: use kv_cache_dtype 'auto'"]
    assert problems(frozenset({"avx2", "avx512f"})) == []
    assert problems(frozenset({"avx2", "amx_tile"})) == []
    assert problems(None) == []  # flags not known (not x86 Linux): not checked
    auto = {**args, "kv_cache_dtype": "auto"}
    assert host_problems(model=str(smollm_shape), context_length=8192, args=auto, device="cpu", gpu_count=0,
                         kv_cache_bytes=None, cpu_flags=frozenset({"avx2"})) == []


def test_a_worker_on_an_avx2_host_refuses_an_fp8_kv_pool_before_starting_an_engine(models, monkeypatch):
    monkeypatch.setattr("inference.specs.cpu_flags", lambda: frozenset({"avx2", "fma"}))
    with pytest.raises(EngineSpecError, match="cannot start: kv_cache_dtype 'fp8_e5m2' needs a CPU with AVX-512"):
        EngineSpec.build(pool="x", model=str(models / "flagship"), context_length=1024,
                         engine_args={**DEMO_ENGINE_ARGS, "kv_cache_dtype": "fp8_e5m2"}, device="cpu")


def test_this_hosts_cpu_flags_are_read():
    from inference.specs import cpu_flags

    flags = cpu_flags()
    if os.path.exists("/proc/cpuinfo") and "flags" in open("/proc/cpuinfo").read():
        assert flags and "fpu" in flags
    else:
        assert flags is None


def test_a_pool_naming_one_structured_outputs_key_keeps_the_pinned_other(models):
    spec = EngineSpec.build(pool="x", model=str(models / "flagship"), context_length=1024, device="cpu",
                            engine_args={**DEMO_ENGINE_ARGS, "structured_outputs_config": {"backend": "guidance"}})
    assert spec.args["structured_outputs_config"] == {"backend": "guidance", "disable_any_whitespace": False}
    pytest.importorskip("vllm")
    compact = EngineSpec.build(pool="x", model=str(models / "flagship"), context_length=1024, device="cpu",
                               engine_args=DEMO_POOL_ENGINE_ARGS["flagship"]).engine_args().structured_outputs_config
    assert (compact.backend, compact.disable_any_whitespace) == ("xgrammar", True)  # what vLLM's engine is given
