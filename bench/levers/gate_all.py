"""The quality gate over every lever the CPU build runs, against the demo flagship:
one row per variant (exact match, perplexity change, acceptance, verdict at the
default tolerance). Creates the variant pools (disabled) in the configured
database if they are missing; one process, so the base is measured once.

    .venv/bin/python -m bench.levers.gate_all
"""
import json
import os

from bench.levers.engine import MODELS, OUT, draft_config, ngram_config

VARIANTS = {  # pool name -> (model folder, engine args over the demo pool's)
    "flagship-ngram": ("flagship", {"speculative_config": ngram_config(4)}),
    "flagship-draft": ("flagship", {"speculative_config": draft_config(3)}),
    "flagship-fp8kv": ("flagship", {"kv_cache_dtype": "fp8"}),
    "flagship-fp8w": ("flagship", {"dtype": "bfloat16", "quantization": "fp8_per_channel"}),
    "flagship-w8a8": ("flagship-w8a8", {"dtype": "bfloat16"}),
    "flagship-w4a16": ("flagship-w4a16", {"dtype": "bfloat16"}),
}


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    django.setup()
    from chatsite.pools.demo import DEMO_ENGINE_ARGS, demo_pool_upsert
    from chatsite.pools.models import ModelPool
    from inference.quantize_demo import quantize_checkpoint
    from workers.quality_gate import gate_run

    base = demo_pool_upsert("flagship")
    for scheme, folder in (("w8a8-int8", "flagship-w8a8"), ("w4a16", "flagship-w4a16")):
        if not (MODELS / folder).exists():
            quantize_checkpoint(MODELS / "flagship", MODELS / folder, scheme)
    rows = {}
    for name, (folder, args) in VARIANTS.items():
        pool, _ = ModelPool.objects.update_or_create(name=name, defaults={
            "display_name": name, "model": str(MODELS / folder), "base_pool": base, "enabled": False,
            "engine_args": {**DEMO_ENGINE_ARGS, **args}, "context_length": base.context_length})
        pool.full_clean()
        try:
            r = gate_run(pool)
        except Exception as exc:  # report and go on: one lever failing to start is a finding too
            rows[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            print(f"{name:16s} ERROR {rows[name]['error']}", flush=True)
            continue
        rows[name] = {k: r[k] for k in ("exact_match", "token_agreement", "base_perplexity", "variant_perplexity",
                                        "ppl_increase", "acceptance_rate", "lossy", "reasons")}
        rows[name]["status"] = pool.gate_status
        acc = f"{r['acceptance_rate']:.1%}" if r["acceptance_rate"] is not None else "-"
        print(f"{name:16s} {pool.gate_status:7s} exact {r['exact_match']:6.1%} agree {r['token_agreement']:6.1%} "
              f"ppl {r['base_perplexity']:.4f} -> {r['variant_perplexity']:.4f} ({r['ppl_increase']:+.3%}) "
              f"accept {acc}", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "levers_gate.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
