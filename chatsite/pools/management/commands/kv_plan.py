import dataclasses
import json

from django.core.management.base import BaseCommand, CommandError

from inference.engine_config import ENGINE_ARG_DEFAULTS
from chatsite.pools.kv_plan import (GPUS, GiB, Gpu, ModelShape, PlanError, format_plan, kv_plan, load_config,
                                    presets, size, weights_bytes_for)
from chatsite.pools.models import ModelPool

DEFAULT_PRESET = "llama-3.1-8b-instruct"


class Command(BaseCommand):
    help = ("KV capacity plan for a model on a GPU: KV bytes per token, memory left after weights, tokens and "
            "concurrent chats at a context length, and the bandwidth floor of one decode step. "
            f"Without --model or --pool it plans the seed's example ({DEFAULT_PRESET} on an H100).")

    def add_arguments(self, parser):
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--model", help=f"a model folder, a config.json, or a preset ({', '.join(presets())})")
        source.add_argument("--pool", help="plan a pool: its model's config.json and its KV dtype / quantization")
        parser.add_argument("--gpu", choices=sorted(GPUS), help="a GPU preset (default: the preset's, else H100)")
        parser.add_argument("--memory-gib", type=float, help="GPU memory, overrides --gpu")
        parser.add_argument("--bandwidth-tbs", type=float, help="GPU memory bandwidth in TB/s, overrides --gpu")
        parser.add_argument("--kv-dtype", help="KV cache dtype: auto (the model's), fp8, bfloat16, ...")
        parser.add_argument("--quantization", help="weight quantization scheme (sizes the weights)")
        parser.add_argument("--weights-gib", type=float, help="weight memory (default: parameters x bytes each)")
        parser.add_argument("--overhead-gib", type=float, help="activations and runtime (default 4)")
        parser.add_argument("--context", type=int,
                            help="tokens per chat (default 8192, or the model's window if shorter)")
        parser.add_argument("--json", action="store_true", help="print the figures as JSON")

    def handle(self, *args, **o):
        kv_dtype, quantization, dtype = o["kv_dtype"], o["quantization"], None
        if o["pool"]:
            pool = ModelPool.objects.filter(name=o["pool"]).first()
            if pool is None:
                raise CommandError(f"no pool named {o['pool']!r}")
            source = pool.model
            args = {**ENGINE_ARG_DEFAULTS, **pool.engine_args}
            kv_dtype, dtype = kv_dtype or args["kv_cache_dtype"], args["dtype"]
            quantization = quantization or args["quantization"]
        else:
            source = o["model"] or DEFAULT_PRESET
        try:
            config = load_config(source)
            budget = config.get("planner", {})
            shape = ModelShape.from_config(config)
            if dtype:  # the pool's engine computes and caches in its own dtype
                shape = dataclasses.replace(shape, dtype=dtype)
            gpu = GPUS[o["gpu"] or budget.get("gpu", "h100-sxm-80gb")]
            if o["memory_gib"] or o["bandwidth_tbs"]:
                gpu = Gpu("custom GPU", int((o["memory_gib"] or gpu.memory_bytes / GiB) * GiB),
                          (o["bandwidth_tbs"] or gpu.bandwidth_bytes_per_s / 1e12) * 1e12)
            estimate = weights_bytes_for(shape, source, quantization=quantization)
            weights_gib = o["weights_gib"] if o["weights_gib"] is not None else (
                None if quantization else budget.get("weights_gib"))
            weights = int(weights_gib * GiB) if weights_gib is not None else estimate
            overhead = o["overhead_gib"] if o["overhead_gib"] is not None else budget.get("overhead_gib", 4)
            plan = kv_plan(shape, gpu, weights_bytes=weights, kv_cache_dtype=kv_dtype or "auto",
                           overhead_bytes=int(overhead * GiB),
                           chat_context=o["context"] or min(8192, shape.max_position_embeddings))
        except PlanError as exc:
            raise CommandError(str(exc)) from exc
        if o["json"]:
            self.stdout.write(json.dumps({"model": str(source), **plan.as_dict()}, indent=2))
            return
        self.stdout.write(f"model: {source} ({shape.num_parameters / 1e6:,.1f}M parameters, {shape.dtype}; "
                          f"{shape.num_hidden_layers} layers, {shape.num_key_value_heads} KV heads x "
                          f"{shape.head_dim} dims)")
        if weights != estimate:
            self.stdout.write(f"weights: {size(weights)} as budgeted (parameters x bytes would be {size(estimate)})")
        for line in format_plan(plan, kv_cache_dtype=kv_dtype or "auto"):
            self.stdout.write(line)
