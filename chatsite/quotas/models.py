"""Per-tenant limits and the token ledger that enforces the budget."""
from django.db import models


class TenantQuota(models.Model):
    class Period(models.TextChoices):
        DAY = "day"
        MONTH = "month"

    tenant = models.OneToOneField("tenancy.Tenant", on_delete=models.CASCADE, related_name="quota")
    token_budget = models.PositiveBigIntegerField(null=True, blank=True,
                                                  help_text="Prompt + completion tokens per period; empty = unlimited.")
    period = models.CharField(max_length=5, choices=Period.choices, default=Period.MONTH)
    max_concurrent_runs = models.PositiveIntegerField(null=True, blank=True, help_text="Empty = unlimited.")
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True, help_text="Empty = unlimited.")

    def __str__(self) -> str:
        return f"quota of {self.tenant}"


class TenantUsage(models.Model):
    """One row per tenant and period: tokens settled, and tokens reserved by runs in flight."""

    tenant = models.ForeignKey("tenancy.Tenant", on_delete=models.CASCADE, related_name="usage")
    period_start = models.DateTimeField()
    used_tokens = models.PositiveBigIntegerField(default=0)
    reserved_tokens = models.PositiveBigIntegerField(default=0)
    refused_requests = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "period_start"], name="one_usage_row_per_period")]
        ordering = ["-period_start"]

    def __str__(self) -> str:
        return f"{self.tenant} from {self.period_start:%Y-%m-%d}"
