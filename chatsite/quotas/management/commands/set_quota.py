from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from chatsite.quotas.models import TenantQuota
from chatsite.tenancy.models import Tenant

LIMITS = ("token_budget", "max_concurrent_runs", "requests_per_minute")
KEEP = object()  # an option not given: the limit keeps its value


def limit(value: str):
    """A whole number, or 'none' for unlimited."""
    if value.strip().lower() in ("none", "unlimited"):
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValueError(value) from None
    if number < 0:
        raise ValueError(value)
    return number


limit.__name__ = "limit (a whole number or 'none')"  # how argparse names it in an error


class Command(BaseCommand):
    help = ("Set a tenant's quota: token budget per period, runs at once, requests per minute ('none' = "
            "unlimited). Limits not given keep their value. Prints the quota.")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="The tenant's slug.")
        parser.add_argument("--token-budget", type=limit, default=KEEP, help="prompt + completion tokens per period")
        parser.add_argument("--period", choices=TenantQuota.Period.values, help="the budget's period")
        parser.add_argument("--max-concurrent-runs", type=limit, default=KEEP, help="replies in progress at once")
        parser.add_argument("--requests-per-minute", type=limit, default=KEEP)

    def handle(self, *args, tenant, period, **opts):
        team = Tenant.objects.filter(slug=tenant).first()
        if team is None:
            raise CommandError(f"no tenant with the slug {tenant!r}")
        quota = TenantQuota.objects.filter(tenant=team).first() or TenantQuota(tenant=team)
        for field in LIMITS:
            if opts[field] is not KEEP:
                setattr(quota, field, opts[field])
        if period:
            quota.period = period
        try:
            quota.full_clean()
        except ValidationError as exc:
            raise CommandError("; ".join(f"{f}: {' '.join(m)}" for f, m in exc.message_dict.items())) from None
        quota.save()  # the same single-row write the admin's form does
        shown = {f: "unlimited" if getattr(quota, f) is None else getattr(quota, f) for f in LIMITS}
        self.stdout.write(f"{team.slug}: token_budget {shown['token_budget']} per {quota.period}, "
                          f"max_concurrent_runs {shown['max_concurrent_runs']}, "
                          f"requests_per_minute {shown['requests_per_minute']}")
