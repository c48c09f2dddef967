import json

from django.core.management.base import BaseCommand, CommandError

from chatsite.pools.models import GateStatus, ModelPool
from inference.specs import EngineSpecError
from workers.quality_gate import GateError, gate_rejudge, gate_run


def _pool(name: str) -> ModelPool:
    pool = ModelPool.objects.filter(name=name).first()
    if pool is None:
        raise CommandError(f"no pool named {name!r}")
    return pool


class Command(BaseCommand):
    help = ("Run the quality gate: start the base pool's engine and the variant's (in this process, one at a "
            "time), compare greedy replies to fixed prompts and held-out perplexity, and record the verdict "
            "on the variant. Exits 1 when the gate fails.")

    def add_arguments(self, parser):
        parser.add_argument("--pool", required=True, help="the variant pool")
        parser.add_argument("--base", help="the base pool (default: the variant's base_pool)")
        parser.add_argument("--max-ppl-increase", type=float,
                            help="set the pool's tolerance: largest relative perplexity rise (0.02 = 2%%)")
        parser.add_argument("--min-exact-match", type=float,
                            help="set the pool's tolerance: smallest share of identical greedy replies")
        parser.add_argument("--rejudge", action="store_true",
                            help="judge the stored figures under the (new) tolerance without starting engines")
        parser.add_argument("--enable", action="store_true", help="enable the pool if the gate passes")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--reuse-figures", action="store_true",
                            help="start no engine when the pool already has figures for its current "
                                 "configuration: judge those under its current tolerance (setup runs the gate "
                                 "this way)")

    def handle(self, *args, **o):
        pool = _pool(o["pool"])
        base = _pool(o["base"]) if o["base"] else None
        if base is not None and pool.base_pool_id != base.pk:
            pool.base_pool = base
            ModelPool.objects.filter(pk=pool.pk).update(base_pool=base)
        if o["max_ppl_increase"] is not None:
            pool.gate_max_ppl_increase = o["max_ppl_increase"]
        if o["min_exact_match"] is not None:
            pool.gate_min_exact_match = o["min_exact_match"]
        measured = pool.gate_report and pool.gate_fingerprint == pool.config_fingerprint() \
            and "exact_match" in pool.gate_report
        if o["reuse_figures"] and measured:
            o["rejudge"] = True
            self.stdout.write(f"pool {pool.name}: figures measured {pool.gate_checked_at:%Y-%m-%d %H:%M} for this "
                              "configuration; judged again, no engine started")
        try:
            report = gate_rejudge(pool) if o["rejudge"] else gate_run(pool, base=base)
        except (GateError, EngineSpecError) as exc:
            raise CommandError(str(exc)) from exc
        if o["enable"] and pool.gate_status == GateStatus.PASSED:
            ModelPool.objects.filter(pk=pool.pk).update(enabled=True)
        if o["json"]:
            self.stdout.write(json.dumps({"status": pool.gate_status, **report}, indent=2, default=str))
        else:
            self._print(pool, report)
        if pool.gate_status != GateStatus.PASSED:
            raise SystemExit(1)

    def _print(self, pool: ModelPool, r: dict) -> None:
        w = self.stdout.write
        w(f"pool {pool.name} vs base {r['base']}: {', '.join(r['lossy']) or 'lossless (speculation only)'}")
        w(f"  greedy exact match: {r['exact_match']:.1%} of {r['prompts']} prompts "
          f"(token agreement {r['token_agreement']:.1%})")
        w(f"  held-out perplexity: base {r['base_perplexity']:.4f}, variant {r['variant_perplexity']:.4f} "
          f"({r['ppl_increase']:+.3%}) over {r['heldout_tokens']} tokens")
        if r.get("acceptance_rate") is not None:
            w(f"  speculation: {r['accepted_tokens']} of {r['draft_tokens']} draft tokens accepted "
              f"({r['acceptance_rate']:.1%})")
        for m in r["mismatches"]:
            w(f"  differs on {m['prompt']!r}:\n    base:    {m['base'][:100]!r}\n    variant: {m['variant'][:100]!r}")
        verdict = self.style.SUCCESS("PASSED") if pool.gate_status == GateStatus.PASSED else self.style.ERROR("FAILED")
        w(f"gate {verdict}" + (": " + "; ".join(r["reasons"]) if r["reasons"] else ""))
