"""`manage.py set_quota`: a tenant's limits from a script, enforced at admission."""
import io

import pytest
from django.core.management import CommandError, call_command

from chatsite.errors import RateLimited
from chatsite.quotas.models import TenantQuota
from chatsite.runs.admission import run_submit

pytestmark = pytest.mark.django_db


def set_quota(*args) -> str:
    out = io.StringIO()
    call_command("set_quota", *args, stdout=out)
    return out.getvalue().strip()


def test_set_quota_writes_the_limits_and_keeps_those_not_given(tenant):
    out = set_quota("--tenant", tenant.slug, "--token-budget", "5000", "--period", "day", "--requests-per-minute", "60")
    assert out == f"{tenant.slug}: token_budget 5000 per day, max_concurrent_runs unlimited, requests_per_minute 60"
    set_quota("--tenant", tenant.slug, "--max-concurrent-runs", "2")
    quota = TenantQuota.objects.get(tenant=tenant)
    limits = (quota.token_budget, quota.period, quota.max_concurrent_runs, quota.requests_per_minute)
    assert limits == (5000, "day", 2, 60)
    set_quota("--tenant", tenant.slug, "--token-budget", "none")
    assert TenantQuota.objects.get(tenant=tenant).token_budget is None


def test_the_quota_set_is_the_one_admission_enforces(tenant, chat):
    set_quota("--tenant", tenant.slug, "--token-budget", "1")
    with pytest.raises(RateLimited, match="budget"):
        run_submit(chat=chat, content="hello")


@pytest.mark.parametrize("args, problem", [
    (["--tenant", "missing"], "no tenant with the slug 'missing'"),
    (["--token-budget", "lots"], "invalid limit"),
    (["--max-concurrent-runs", "-3"], "invalid limit"),
])
def test_set_quota_names_the_problem(tenant, args, problem):
    args = args if args[0] == "--tenant" else ["--tenant", tenant.slug, *args]
    with pytest.raises(CommandError, match=problem):
        set_quota(*args)
