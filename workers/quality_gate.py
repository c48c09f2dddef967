"""The quality gate: a pool variant serves only once its answers match its base pool's.

A variant that only adds speculation computes the same function as its base, so
its greedy replies must be identical, token for token: a difference is a bug,
whatever the tolerance. A lossy variant (quantized weights, FP8 KV cache, another
dtype or checkpoint) is judged on held-out perplexity and on exact-match of
greedy replies to fixed prompts, within the tolerance the operator set on the pool.

Measuring starts real engines (inference.evaluation); judging is a pure function
of the figures, so a stored report can be judged again under a new tolerance.
"""
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from chatsite.pools.models import GateStatus, ModelPool

log = logging.getLogger(__name__)

# Engine settings that change scheduling, not the numbers each token is computed from.
SCHEDULING_KEYS = frozenset({
    "speculative_config", "max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill", "block_size",
    "enable_prefix_caching", "scheduling_policy", "gpu_memory_utilization", "tensor_parallel_size",
    "disable_log_stats", "enable_log_requests", "enforce_eager",
})
MAX_MISMATCHES_SHOWN = 4


class GateError(ValueError):
    """The gate cannot run for these pools (no base, a base that is itself a variant, ...)."""


@dataclass(frozen=True)
class Tolerance:
    max_ppl_increase: float  # relative: 0.02 = perplexity may rise 2%
    min_exact_match: float  # share of fixed prompts whose greedy reply equals the base's

    @classmethod
    def of(cls, pool: ModelPool) -> "Tolerance":
        return cls(pool.gate_max_ppl_increase, pool.gate_min_exact_match)


def lossy_differences(pool: ModelPool, base: ModelPool) -> list[str]:
    """What differs between variant and base that changes the computed numbers ([] = lossless)."""
    from inference.specs import DEFAULT_ENGINE_ARGS

    out = [] if pool.model == base.model else [f"model {pool.model}"]
    mine, theirs = {**DEFAULT_ENGINE_ARGS, **pool.engine_args}, {**DEFAULT_ENGINE_ARGS, **base.engine_args}
    for key in sorted(set(mine) - SCHEDULING_KEYS):
        if mine[key] != theirs[key]:
            out.append(f"{key} {mine[key]!r} (base {theirs[key]!r})")
    return out


def compare(base, variant, prompts) -> dict:
    """The gate's figures from two inference.evaluation.Measurement objects."""
    same = [a == b for a, b in zip(base.completions, variant.completions)]
    agreement = []
    for a, b in zip(base.completions, variant.completions):
        common = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        agreement.append(common / max(len(a), len(b), 1))
    mismatches = [{"prompt": prompts[i], "base": base.texts[i], "variant": variant.texts[i]}
                  for i, ok in enumerate(same) if not ok]
    return {
        "prompts": len(same),
        "exact_match": sum(same) / len(same),
        "token_agreement": sum(agreement) / len(agreement),
        "base_perplexity": base.perplexity,
        "variant_perplexity": variant.perplexity,
        "ppl_increase": variant.perplexity / base.perplexity - 1,
        "heldout_tokens": variant.heldout_tokens,
        "draft_tokens": variant.draft_tokens,
        "accepted_tokens": variant.accepted_tokens,
        "acceptance_rate": variant.accepted_tokens / variant.draft_tokens if variant.draft_tokens else None,
        "mismatches": mismatches[:MAX_MISMATCHES_SHOWN],
        "mismatch_count": len(mismatches),
    }


def judge(figures: dict, *, lossy: list[str], tolerance: Tolerance) -> tuple[str, list[str]]:
    """(GateStatus, reasons) for the figures; lossless variants must match exactly."""
    reasons = []
    if not lossy:
        if figures["exact_match"] < 1:
            reasons.append(f"speculation changed {figures['mismatch_count']} of {figures['prompts']} greedy "
                           "replies; it must not change any (a bug, not a tolerance question)")
    else:
        if figures["ppl_increase"] > tolerance.max_ppl_increase:
            reasons.append(f"held-out perplexity rose {figures['ppl_increase']:+.3%} "
                           f"({figures['base_perplexity']:.4f} -> {figures['variant_perplexity']:.4f}); "
                           f"tolerance {tolerance.max_ppl_increase:.3%}")
        if figures["exact_match"] < tolerance.min_exact_match:
            reasons.append(f"exact match {figures['exact_match']:.1%} of greedy replies is below "
                           f"{tolerance.min_exact_match:.1%}")
    return (GateStatus.FAILED if reasons else GateStatus.PASSED), reasons


def _spec(pool: ModelPool):
    from inference.specs import EngineSpec

    return EngineSpec.build(pool=pool.name, model=pool.model, context_length=pool.context_length,
                            engine_args=pool.engine_args)


_base_measurements: dict[str, object] = {}  # base fingerprint -> Measurement, for one process


def _half_cores() -> list[str] | None:
    """Two disjoint core sets (VLLM_CPU_OMP_THREADS_BIND syntax) for two engines, or None with < 2 cores."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return None
    half = len(cores) // 2
    return [",".join(map(str, cores[:half])), ",".join(map(str, cores[half:]))]


def _measure_pair(base: ModelPool, pool: ModelPool, heldout: str):
    """(base, variant) Measurements. A CPU host with two cores or more measures both at once,
    each engine on its own half of the cores, so that their starts and runs overlap; the base's
    figures are reused within a process."""
    from inference.evaluation import measure, measure_side_by_side

    # A gate engine runs a few dozen short sequences: 1 GiB of KV on a CPU host (as the
    # Procfile does for workers) instead of vLLM's default of 90% of the machine's memory.
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    key = base.config_fingerprint()
    binds = _half_cores() if base.device == pool.device == "cpu" else None
    if key not in _base_measurements and binds:
        log.info("quality gate: starting the engines of %s and %s side by side (cores %s)", base.name, pool.name,
                 " and ".join(binds))
        _base_measurements[key], variant = measure_side_by_side([_spec(base), _spec(pool)], heldout_text=heldout,
                                                                cpu_binds=binds)
        return _base_measurements[key], variant
    if key not in _base_measurements:
        log.info("quality gate: starting an engine for %s", base.name)
        _base_measurements[key] = measure(_spec(base), heldout_text=heldout)
    log.info("quality gate: starting an engine for %s", pool.name)
    return _base_measurements[key], measure(_spec(pool), heldout_text=heldout)


def gate_run(pool: ModelPool, *, base: ModelPool | None = None, heldout_path: Path | None = None) -> dict:
    """Measure `pool` against its base (starting both engines), judge, record on the pool.

    Returns the report. Raises GateError when there is nothing to compare with, and
    inference.specs.EngineSpecError when either engine configuration is refused."""
    base = base or pool.base_pool
    if base is None:
        raise GateError(f"pool {pool.name!r} has no base pool to compare with")
    if base.pk == pool.pk or base.levers:
        raise GateError(f"the base {base.name!r} must be a plain pool (no speculation, quantization or FP8 KV)")
    heldout_path = heldout_path or Path(settings.CHATSITE["DEMO_MODELS_DIR"]) / "heldout.txt"
    heldout = heldout_path.read_text()
    from inference.evaluation import GATE_PROMPTS

    base_m, variant_m = _measure_pair(base, pool, heldout)
    figures = compare(base_m, variant_m, GATE_PROMPTS)
    lossy = lossy_differences(pool, base)
    status, reasons = judge(figures, lossy=lossy, tolerance=Tolerance.of(pool))
    report = {**figures, "base": base.name, "lossy": lossy, "reasons": reasons,
              "tolerance": {"max_ppl_increase": pool.gate_max_ppl_increase,
                            "min_exact_match": pool.gate_min_exact_match},
              "seconds": {"base": base_m.seconds, "variant": variant_m.seconds}}
    gate_record(pool, status=status, report=report)
    return report


def gate_rejudge(pool: ModelPool) -> dict:
    """Judge the stored figures again under the pool's current tolerance (no engines).
    Raises GateError if there are none for the pool's current configuration."""
    report = dict(pool.gate_report or {})
    if not report or pool.gate_fingerprint != pool.config_fingerprint():
        raise GateError(f"pool {pool.name!r} has no gate figures for its current configuration; run the gate")
    status, reasons = judge(report, lossy=report["lossy"], tolerance=Tolerance.of(pool))
    report.update(reasons=reasons, tolerance={"max_ppl_increase": pool.gate_max_ppl_increase,
                                              "min_exact_match": pool.gate_min_exact_match})
    gate_record(pool, status=status, report=report)
    return report


def gate_record(pool: ModelPool, *, status: str, report: dict) -> None:
    """Store the verdict with the configuration it is about (a later edit makes it stale)."""
    now = timezone.now()
    ModelPool.objects.filter(pk=pool.pk).update(
        gate_status=status, gate_report=report, gate_checked_at=now, gate_fingerprint=pool.config_fingerprint(),
        gate_max_ppl_increase=pool.gate_max_ppl_increase, gate_min_exact_match=pool.gate_min_exact_match)
    pool.gate_status, pool.gate_report, pool.gate_checked_at = status, report, now
    pool.gate_fingerprint = pool.config_fingerprint()
