"""Finalize in one statement (chatsite/runs/services/finalize.py): the run, its message and
the tenant's usage written together; what the stream does not tell kept; a second
finalize changes nothing; the usage row of the run's period settled, or made."""
from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection

from chatsite import redis_keys
from chatsite.quotas.models import TenantQuota, TenantUsage
from chatsite.quotas.periods import period_start, period_start_sql
from chatsite.redis_client import get_redis
from chatsite.runs.models import GenerationRun
from chatsite.runs.admission import run_submit
from chatsite.runs.services import run_finalize
from chatsite.runs.stream import codec
from tests.runs.helpers import end_stream, xadd_tokens

pytestmark = pytest.mark.django_db

MOMENTS = [datetime(2026, 12, 3, 7, 30, tzinfo=timezone.utc), datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
           datetime(2027, 1, 1, 0, 0, tzinfo=timezone.utc), datetime(2028, 2, 29, 12, tzinfo=timezone.utc),
           datetime(2026, 6, 1, 1, 30, tzinfo=timezone(timedelta(hours=5)))]  # May 31 in UTC


@pytest.mark.parametrize("period", ["day", "month", None])
def test_the_sql_period_start_is_the_python_one(period):
    with connection.cursor() as cur:
        for moment in MOMENTS:
            cur.execute(f"SELECT {period_start_sql('%s::timestamptz', '%s::text')}", [period, moment])  # period first
            assert cur.fetchone()[0] == period_start(moment, period or "month"), (moment, period)


def _usage(tenant) -> TenantUsage | None:
    return TenantUsage.objects.filter(tenant=tenant).first()


def test_a_budgeted_run_releases_its_reservation_and_records_its_tokens_once(tenant, chat):
    TenantQuota.objects.create(tenant=tenant, token_budget=10_000)
    run = run_submit(chat=chat, content="hello", max_tokens=50)
    reserved = _usage(tenant).reserved_tokens
    assert reserved == run.reserved_tokens > 0
    xadd_tokens(run.pk, ["a", "b", "c"])
    end_stream(run.pk, codec.done_fields(finish_reason="stop", prompt_tokens=9, completion_tokens=3))
    assert run_finalize(run_id=run.pk) == "completed"
    usage = _usage(tenant)
    assert (usage.reserved_tokens, usage.used_tokens) == (0, 12)
    done = GenerationRun.objects.get(pk=run.pk)
    assert done.status == "completed" and done.prompt_tokens == 9 and done.completion_tokens == 3
    assert run_finalize(run_id=run.pk) == "completed"  # the second changes nothing
    assert GenerationRun.objects.get(pk=run.pk).finished_at == done.finished_at
    usage.refresh_from_db()
    assert (usage.reserved_tokens, usage.used_tokens) == (0, 12)


def test_without_a_usage_row_the_periods_row_is_made_with_the_tokens(tenant, chat):
    run = run_submit(chat=chat, content="hello", max_tokens=50)  # no quota: admission reserves nothing
    assert _usage(tenant) is None
    xadd_tokens(run.pk, ["a", "b"])
    end_stream(run.pk, codec.done_fields(finish_reason="length", prompt_tokens=4, completion_tokens=2))
    run_finalize(run_id=run.pk)
    usage = _usage(tenant)
    assert (usage.used_tokens, usage.reserved_tokens) == (6, 0)
    assert usage.period_start == period_start(run.queued_at, "month")


def test_a_failed_run_keeps_what_the_stream_does_not_tell(tenant, chat):
    run = run_submit(chat=chat, content="hello", max_tokens=50)
    GenerationRun.objects.filter(pk=run.pk).update(prompt_tokens=5)  # as counted by an earlier attempt
    end_stream(run.pk, codec.error_fields(code="engine_failed", message="it broke"))
    assert run_finalize(run_id=run.pk) == "failed"
    failed = GenerationRun.objects.get(pk=run.pk)
    assert failed.status == "failed" and failed.finish_reason == "error" and failed.error == "engine_failed: it broke"
    assert failed.prompt_tokens == 5 and failed.first_token_at is None and failed.ttft_ms is None
    assert failed.itl_ms is None and failed.logprobs is None
    assert _usage(tenant).used_tokens == 5


def test_timings_and_logprobs_come_from_the_stream(tenant, chat):
    run = run_submit(chat=chat, content="hello", max_tokens=50, logprobs=0)
    stream = redis_keys.run_stream(run.pk)
    first = int(run.queued_at.timestamp() * 1000) + 250
    for seq, ms in enumerate((first, first + 40, first + 100)):
        get_redis().xadd(stream, codec.logprobs_token_fields(seq=seq, n=1, text="x", attempt=1,
                                                             logprobs=[["x", -0.5, []]]), id=f"{ms}-0")
    end_stream(run.pk, codec.done_fields(finish_reason="stop", prompt_tokens=3, completion_tokens=3))
    run_finalize(run_id=run.pk)
    done = GenerationRun.objects.get(pk=run.pk)
    assert done.first_token_at == datetime.fromtimestamp(first / 1000, tz=timezone.utc)
    assert done.ttft_ms == int((done.first_token_at - done.queued_at).total_seconds() * 1000) in (249, 250)
    assert done.itl_ms == 50.0 and done.logprobs == [["x", -0.5, []]] * 3
    assert done.assistant_message.content == "xxx" and done.assistant_message.token_count == 3


def test_a_run_that_did_not_ask_for_logprobs_saves_none(tenant, chat):
    run = run_submit(chat=chat, content="hello", max_tokens=50)
    xadd_tokens(run.pk, ["a"])
    end_stream(run.pk, codec.done_fields(finish_reason="stop", prompt_tokens=3, completion_tokens=1))
    run_finalize(run_id=run.pk)
    done = GenerationRun.objects.get(pk=run.pk)
    assert done.logprobs is None and done.itl_ms is None and done.ttft_ms is not None


def test_an_unknown_run_is_refused():
    get_redis().xadd(redis_keys.run_stream(987654321), codec.done_fields(finish_reason="stop", prompt_tokens=1,
                                                                         completion_tokens=0))
    with pytest.raises(GenerationRun.DoesNotExist):
        run_finalize(run_id=987654321)
