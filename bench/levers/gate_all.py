"""The quality gate over every lever the CPU build runs, against the demo flagship:
one row per variant (exact match, perplexity change, acceptance, verdict at the
default tolerance), against the float32 demo flagship and, for the quantized
ones, also against a bfloat16 copy (the quantization alone). Creates or updates
the pools (variants disabled) in the configured database; one process, so each
base is measured once.

    .venv/bin/python -m bench.levers.gate_all
"""
import json
import os

from bench.levers.engine import MODELS, OUT, draft_config, ngram_config

BF16 = {"dtype": "bfloat16"}
# Bases: the demo flagship (float32) and "flagship-bf16", a plain bfloat16 copy.
VARIANTS = {  # pool name -> (base pool, model folder, engine args over the demo pool's)
    "flagship-ngram": ("flagship", "flagship", {"speculative_config": ngram_config(4)}),
    "flagship-draft": ("flagship", "flagship", {"speculative_config": draft_config(3)}),
    "flagship-fp8kv": ("flagship", "flagship", {"kv_cache_dtype": "fp8"}),
    "flagship-fp8w": ("flagship", "flagship", {**BF16, "quantization": "fp8_per_channel"}),
    "flagship-w8a8": ("flagship", "flagship-w8a8", BF16),
    "flagship-w4a16": ("flagship", "flagship-w4a16", BF16),
    # the same quantized weights against a bfloat16 base: the quantization alone
    "bf16-fp8kv": ("flagship-bf16", "flagship", {**BF16, "kv_cache_dtype": "fp8"}),
    "bf16-fp8w": ("flagship-bf16", "flagship", {**BF16, "quantization": "fp8_per_channel"}),
    "bf16-w8a8": ("flagship-bf16", "flagship-w8a8", BF16),
    "bf16-w4a16": ("flagship-bf16", "flagship-w4a16", BF16),
}


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    django.setup()
    from chatsite.pools.models import ModelPool
    from inference.engine_config import TINY_ENGINE_ARGS
    from inference.quantize_demo import quantize_checkpoint
    from workers.quality_gate import gate_run

    bases = {}  # the tiny trained flagship, as the demo pools served it before SmolLM2
    bases["flagship"], _ = ModelPool.objects.update_or_create(name="tiny-flagship", defaults={
        "display_name": "tiny-flagship", "model": str(MODELS / "flagship"), "enabled": False,
        "engine_args": TINY_ENGINE_ARGS, "context_length": 1024})
    bases["flagship-bf16"], _ = ModelPool.objects.update_or_create(name="flagship-bf16", defaults={
        "display_name": "flagship-bf16", "model": str(MODELS / "flagship"), "enabled": False,
        "engine_args": {**TINY_ENGINE_ARGS, **BF16}})
    for scheme, folder in (("w8a8-int8", "flagship-w8a8"), ("w4a16", "flagship-w4a16")):
        if not (MODELS / folder).exists():
            quantize_checkpoint(MODELS / "flagship", MODELS / folder, scheme)
    rows = {}
    for name, (base, folder, args) in VARIANTS.items():
        pool, _ = ModelPool.objects.update_or_create(name=name, defaults={
            "display_name": name, "model": str(MODELS / folder), "base_pool": bases[base], "enabled": False,
            "engine_args": {**TINY_ENGINE_ARGS, **args}, "context_length": bases[base].context_length})
        pool.full_clean()
        try:
            r = gate_run(pool)
        except Exception as exc:  # report and go on: one lever failing to start is a finding too
            rows[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            print(f"{name:16s} ERROR {rows[name]['error']}", flush=True)
            continue
        rows[name] = {k: r[k] for k in ("exact_match", "token_agreement", "base_perplexity", "variant_perplexity",
                                        "ppl_increase", "acceptance_rate", "lossy", "reasons")}
        rows[name].update(status=pool.gate_status, base=base)
        acc = f"{r['acceptance_rate']:.1%}" if r["acceptance_rate"] is not None else "-"
        print(f"{name:16s} vs {base:13s} {pool.gate_status:7s} exact {r['exact_match']:6.1%} agree {r['token_agreement']:6.1%} "
              f"ppl {r['base_perplexity']:.4f} -> {r['variant_perplexity']:.4f} ({r['ppl_increase']:+.3%}) "
              f"accept {acc}", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "levers_gate.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
