"""Model pools: one served model each, with its engine arguments pinned."""
from django.db import models


class ModelPool(models.Model):
    name = models.SlugField(max_length=50, unique=True, help_text="The model name clients send, e.g. 'flagship'.")
    display_name = models.CharField(max_length=100)
    model = models.CharField(max_length=500, help_text="A local path or a hub id the worker loads.")
    # Every engine argument, explicit; inference.specs validates the keys.
    engine_args = models.JSONField(default=dict, blank=True)
    # Default sampling: temperature, top_p, max_tokens.
    default_sampling = models.JSONField(default=dict, blank=True)
    context_length = models.PositiveIntegerField(default=1024)
    max_output_tokens = models.PositiveIntegerField(default=512)
    enabled = models.BooleanField(default=True)
    # Load shedding and autoscaling.
    max_queued_runs = models.PositiveIntegerField(default=500, help_text="Refuse new runs (503) past this many queued.")
    max_queue_wait_seconds = models.PositiveIntegerField(
        default=60, help_text="Refuse new runs (503 + Retry-After) when the expected queue wait is longer.")
    ttft_slo_ms = models.PositiveIntegerField(default=2000, help_text="Time-to-first-token p95 objective.")
    min_replicas = models.PositiveIntegerField(default=1)
    max_replicas = models.PositiveIntegerField(default=8)
    replica_warmup_seconds = models.PositiveIntegerField(default=180, help_text="How long a new replica takes to serve.")
    recommended_replicas = models.PositiveIntegerField(null=True, blank=True, editable=False)
    recommendation_reason = models.CharField(max_length=300, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
