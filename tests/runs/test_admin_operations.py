"""The admin for operators: Cancel and Retry on runs, and the operations page."""
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from chatsite.runs.models import GenerationRun
from chatsite.runs.admission import run_submit
from chatsite.runs.services import run_finalize
from chatsite.runs.stream import codec
from tests.factories import UserFactory
from tests.runs.helpers import end_stream, xadd_tokens

pytestmark = pytest.mark.django_db
CHANGELIST = "/admin/runs/generationrun/"


@pytest.fixture
def operator(client):
    client.force_login(get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-123456789"))
    return client


def _act(client, action: str, runs) -> str:
    resp = client.post(CHANGELIST, {"action": action, "index": "0", "_selected_action": [r.pk for r in runs]},
                       follow=True)
    assert resp.status_code == 200
    return resp.content.decode()


def test_cancel_stops_live_runs_and_leaves_ended_ones(operator, chat):
    queued = run_submit(chat=chat, content="Hello")
    page = _act(operator, "cancel_runs", [queued])
    assert "Asked 1 run(s) to stop; 0 had already ended." in page
    queued.refresh_from_db()
    assert queued.status == "cancelled" and queued.finish_reason == "cancelled"
    assert "Asked 0 run(s) to stop; 1 had already ended." in _act(operator, "cancel_runs", [queued])


def test_retry_regenerates_a_failed_reply_and_dispatches_a_queued_run_again(operator, chat):
    failed = run_submit(chat=chat, content="Hello")
    end_stream(failed.pk, codec.error_fields(code="engine_error", message="the engine stopped"))
    assert run_finalize(run_id=failed.pk) == "failed"
    failed = GenerationRun.objects.get(pk=failed.pk)
    page = _act(operator, "retry_runs", [failed])
    new = GenerationRun.objects.exclude(pk=failed.pk).get()
    assert f"Retried: {failed.pk} (as run {new.pk})." in page
    assert new.user_message_id == failed.user_message_id and new.status == "queued"  # a new version, same question
    chat.refresh_from_db()
    assert chat.current_leaf_id == new.assistant_message_id
    # the failed run is no longer the chat's latest reply; a queued one is dispatched again
    page = _act(operator, "retry_runs", [failed, new])
    assert f"Retried: {new.pk} (dispatched again)." in page and "Not retried" in page


def test_the_operations_page_shows_the_first_figures(operator, client, chat, pool):
    now = timezone.now()
    for ttft in (100, 200, 300, 400, 2000):
        run = run_submit(chat=chat, content=f"q{ttft}")
        xadd_tokens(run.pk, ["a", "b", "c"])
        end_stream(run.pk, codec.done_fields(finish_reason="stop", prompt_tokens=3, completion_tokens=3))
        run_finalize(run_id=run.pk)
        GenerationRun.objects.filter(pk=run.pk).update(ttft_ms=ttft, itl_ms=20.0, finished_at=now)
    run_submit(chat=chat, content="waiting")
    GenerationRun.objects.filter(status="queued").update(queued_at=now - timedelta(seconds=30))
    page = operator.get("/admin/operations/").content.decode()
    assert "Flagship" in page
    assert 'data-figure="queued">1<' in page and "oldest waiting 30" in page
    assert "p50 300 ms · p95 1680 ms" in page
    assert "a run decodes at 50.0 (median)" in page and "15 tokens this hour" in page
    assert '<td data-status="completed">5</td>' in page and '<td data-status="queued">1</td>' in page

    client.force_login(UserFactory(tenant=chat.tenant))  # not staff: the product's own refusal
    refused = client.get("/admin/operations/")
    assert refused.status_code == 403 and "<h1>Not allowed</h1>" in refused.content.decode()
    client.logout()
    assert client.get("/admin/operations/")["Location"].startswith("/admin/login/")
