"""Reads for usage, always scoped to one tenant."""
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Q, Sum
from django.utils import timezone

from chatsite.quotas.periods import period_end, period_start
from chatsite.runs.models import GenerationRun


@dataclass(frozen=True)
class ModelUsage:
    model: str
    runs: int
    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class TenantUsage:
    period_start: datetime
    period_end: datetime
    models: list[ModelUsage] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return sum(m.total_tokens for m in self.models)


def usage_this_month(*, tenant, user=None, now: datetime | None = None) -> TenantUsage:
    """Prompt + completion tokens of every run of `tenant` queued since the start
    of the current calendar month (UTC), per model, whichever member or key ran
    it and however it ended; with `user`, only the runs of that member's chats.
    Runs still going count the tokens saved so far (their figures are written
    when they finish)."""
    start = period_start(now or timezone.now(), "month")
    runs = GenerationRun.objects.filter(tenant=tenant, queued_at__gte=start)
    if user is not None:
        runs = runs.filter(chat__owner=user)
    rows = (runs
            .values("pool__name").order_by("pool__name")
            .annotate(runs=Count("id"), completion=Sum("completion_tokens"),
                      # the choices of one completion after its first answer the same prompt: counted once
                      prompt=Sum("prompt_tokens", filter=Q(choice_of__isnull=True))))
    models = [ModelUsage(model=r["pool__name"], runs=r["runs"], prompt_tokens=r["prompt"] or 0,
                         completion_tokens=r["completion"] or 0) for r in rows]
    return TenantUsage(period_start=start, period_end=period_end(start, "month"), models=models)
