import dataclasses

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from chatsite.pools.health import live_workers, pool_is_up, pool_workers
from chatsite.pools.kv_plan import GPUS, ModelShape, PlanError, format_plan, kv_plan, weights_bytes_for
from chatsite.pools.models import ModelPool
from inference.engine_config import ENGINE_ARG_DEFAULTS, model_config


@admin.register(ModelPool)
class ModelPoolAdmin(admin.ModelAdmin):
    list_display = ["name", "display_name", "model", "context_length", "max_output_tokens", "enabled", "up", "workers",
                    "levers_shown", "gate"]
    list_filter = ["enabled", "device", "gate_status"]
    search_fields = ["name", "display_name", "model"]
    readonly_fields = ["gate", "gate_checked_at", "gate_report_shown", "kv_capacity_plan"]
    fieldsets = [
        (None, {"fields": ["name", "display_name", "model", "enabled"]}),
        ("Engine", {"fields": ["device", "context_length", "max_output_tokens", "engine_args", "default_sampling",
                               "chat_template"],
                    "description": "Engine arguments are checked for the device when you save: speculative_config "
                                   "({\"method\": \"ngram\", \"num_speculative_tokens\": 4, \"prompt_lookup_min\": 2, "
                                   "\"prompt_lookup_max\": 4} or {\"method\": \"draft_model\", \"model\": PATH, "
                                   "\"num_speculative_tokens\": 4}), kv_cache_dtype (auto / fp8), quantization, "
                                   "max_num_batched_tokens (the chunked prefill budget), max_num_seqs, "
                                   "enable_prefix_caching, tensor_parallel_size (GPU pools only: the model is split "
                                   "across that many GPUs of one host; it must divide the attention heads and needs "
                                   "distributed_executor_backend \"mp\"; the worker checks its host has that many "
                                   "GPUs)."}),
        ("Quality gate", {"fields": ["base_pool", "gate_max_ppl_increase", "gate_min_exact_match", "gate",
                                     "gate_checked_at", "gate_report_shown"]}),
        ("KV capacity", {"fields": ["kv_capacity_plan"]}),
        ("Load and scaling", {"fields": ["queue_when_cold", "max_queued_runs", "max_queue_wait_seconds", "ttft_slo_ms", "min_replicas",
                                         "max_replicas", "replica_warmup_seconds"]}),
    ]

    def changelist_view(self, request, extra_context=None):
        self._workers = live_workers()
        return super().changelist_view(request, extra_context)

    @admin.display(boolean=True, description="up")
    def up(self, pool):
        return pool_is_up(pool.name, getattr(self, "_workers", None))

    @admin.display(description="live workers")
    def workers(self, pool):
        return len(pool_workers(pool.name, getattr(self, "_workers", None)))

    @admin.display(description="levers")
    def levers_shown(self, pool):
        return ", ".join(pool.levers) or "-"

    @admin.display(description="quality gate")
    def gate(self, pool):
        return pool.gate_verdict

    @admin.display(description="gate report")
    def gate_report_shown(self, pool):
        r = pool.gate_report or {}
        if "exact_match" not in r:
            return "; ".join(r.get("reasons", [])) or "-"
        rows = [("base", r.get("base", "")), ("differs from base by", ", ".join(r.get("lossy", [])) or "speculation only"),
                ("greedy replies identical", f"{r['exact_match']:.1%} of {r['prompts']} (token agreement "
                                             f"{r['token_agreement']:.1%})"),
                ("held-out perplexity", f"{r['base_perplexity']:.4f} -> {r['variant_perplexity']:.4f} "
                                        f"({r['ppl_increase']:+.3%}, {r['heldout_tokens']} tokens)")]
        seconds = r.get("seconds") or {}
        if "greedy" in seconds.get("base", {}) and "greedy" in seconds.get("variant", {}):
            base_s, variant_s = seconds["base"]["greedy"], seconds["variant"]["greedy"]
            rows.append(("time for the greedy replies", f"base {base_s:.1f} s, variant {variant_s:.1f} s "
                                                        f"({base_s / max(variant_s, 1e-9):.1f}x)"))
        if r.get("acceptance_rate") is not None:
            rows.append(("speculation", f"{r['accepted_tokens']} of {r['draft_tokens']} draft tokens accepted "
                                        f"({r['acceptance_rate']:.1%})"))
        rows += [(f"differs on {m['prompt']!r}", f"base: {m['base'][:80]!r} / variant: {m['variant'][:80]!r}")
                 for m in r.get("mismatches", [])]
        rows.append(("verdict", "; ".join(r.get("reasons", [])) or "within tolerance"))
        return format_html("<table>{}</table>", format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows))

    @admin.display(description="KV capacity plan (from the model's config.json)")
    def kv_capacity_plan(self, pool):
        config = model_config(pool.model) if pool.model else None
        if config is None:
            return "config.json is not on this host; run `manage.py kv_plan --model CONFIG` where it is"
        args = {**ENGINE_ARG_DEFAULTS, **(pool.engine_args if isinstance(pool.engine_args, dict) else {})}
        kv_dtype = args["kv_cache_dtype"]
        try:  # the engine computes (and caches K/V) in the pool's dtype, whatever config.json says
            shape = dataclasses.replace(ModelShape.from_config(config), dtype=args["dtype"])
            weights = weights_bytes_for(shape, pool.model, quantization=args["quantization"])
            plans = [format_plan(kv_plan(shape, gpu, weights_bytes=weights, kv_cache_dtype=kv_dtype,
                                         chat_context=min(8192, shape.max_position_embeddings)),
                                 kv_cache_dtype=kv_dtype) for gpu in GPUS.values()]
        except PlanError as exc:
            return str(exc)
        return format_html_join("", "<ul>{}</ul>", ((format_html_join("", "<li>{}</li>", ((line,) for line in p)),)
                                                   for p in plans))
