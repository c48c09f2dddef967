"""Feedback on a reply through the REST API: stored with the run, one per run, the
owner's only; and in the admin, filtered and downloaded as CSV."""
import csv
import io

import pytest
from django.contrib.auth import get_user_model

from chatsite.errors import InvalidInput
from chatsite.runs.models import GenerationRun, ReplyFeedback
from chatsite.runs.admission import run_submit
from chatsite.runs.services import run_cancel, run_finalize
from chatsite.runs.services.feedback import feedback_give
from chatsite.runs.stream import codec
from chatsite.tenancy.services import api_key_create
from tests.api.helpers import assert_error, key_client
from tests.factories import UserFactory
from tests.runs.helpers import end_stream, xadd_tokens

pytestmark = pytest.mark.django_db
J = "application/json"


def _answered(chat, question="What is the capital of France?", answer="Paris."):
    run = run_submit(chat=chat, content=question)
    xadd_tokens(run.pk, [answer])
    end_stream(run.pk, codec.done_fields(finish_reason="stop", prompt_tokens=9, completion_tokens=1))
    run_finalize(run_id=run.pk)
    return GenerationRun.objects.get(pk=run.pk)


def test_rate_a_reply_change_it_and_withdraw_it(api_key, chat):
    client = key_client(api_key)
    running = run_submit(chat=chat, content="Still going")
    url = f"/api/runs/{running.pk}/feedback"
    assert_error(client.put(url, {"rating": "up"}, content_type=J), 400, field="run")  # nothing to judge yet
    run = run_cancel(run=running)  # a stopped reply can be rated too
    url = f"/api/runs/{run.pk}/feedback"
    assert_error(client.get(url), 404)
    resp = client.put(url, {"rating": "down", "comment": "  It never answered.  "}, content_type=J)
    assert resp.status_code == 200, resp.content
    assert resp.json()["rating"] == "down" and resp.json()["comment"] == "It never answered."
    assert client.put(url, {"rating": "up"}, content_type=J).json()["comment"] == ""  # given again: replaced
    stored, = ReplyFeedback.objects.all()
    assert (stored.run_id, stored.rating, stored.tenant_id) == (run.pk, "up", chat.tenant_id)
    assert client.get(url).json()["rating"] == "up"
    assert_error(client.put(url, {"rating": "meh"}, content_type=J), 400, field="rating")
    assert_error(client.put(url, {"rating": "up", "comment": "x" * 2001}, content_type=J), 400, field="comment")
    assert client.delete(url).status_code == 204 and client.delete(url).status_code == 204
    assert not ReplyFeedback.objects.exists()


def test_only_the_chats_owner_rates_its_replies(chat, tenant, pool):
    run = _answered(chat)
    stranger = UserFactory(tenant=tenant)
    _, secret = api_key_create(user=stranger, tenant=tenant, name="other")
    assert_error(key_client(secret).put(f"/api/runs/{run.pk}/feedback", {"rating": "down"}, content_type=J), 404)
    assert not ReplyFeedback.objects.exists()


def test_the_admin_filters_feedback_and_downloads_it_as_csv(client, chat, user):
    liked = _answered(chat)
    feedback_give(run=liked, user=user, rating="up")
    disliked = _answered(chat, "And of Spain?", "Lisbon.")
    feedback_give(run=disliked, user=user, rating="down", comment='Wrong, "Madrid"')
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw-123456789"))
    page = client.get("/admin/runs/replyfeedback/?rating__exact=down").content.decode()
    assert "Wrong, &quot;Madrid&quot;" in page and "1 reply feedback" in page
    resp = client.post("/admin/runs/replyfeedback/?rating__exact=down", {
        "action": "feedback_csv", "select_across": "1", "index": "0",
        "_selected_action": [str(f.pk) for f in ReplyFeedback.objects.all()]})
    assert resp["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(resp.content.decode())))
    assert rows[0][:7] == ["run", "chat", "tenant", "user", "model", "rating", "comment"]
    assert [r[5:9] for r in rows[1:]] == [["down", 'Wrong, "Madrid"', "And of Spain?", "Lisbon."]]


def test_a_reply_ended_but_not_yet_saved_is_saved_and_rated(chat):
    """The stream's end reaches the page before the worker saves the run: a rating then
    saves it first (as the door does), not refuses it as still being written."""
    run = run_submit(chat=chat, content="Hello")
    xadd_tokens(run.pk, ["Hi"])
    end_stream(run.pk, codec.done_fields(finish_reason="stop", prompt_tokens=3, completion_tokens=1))
    feedback_give(run=run, user=chat.owner, rating="up")
    saved = GenerationRun.objects.select_related("assistant_message").get(pk=run.pk)
    assert saved.status == "completed" and saved.assistant_message.content == "Hi"
    assert ReplyFeedback.objects.get(run=run).rating == "up"
    running = run_submit(chat=chat, content="And?")
    with pytest.raises(InvalidInput, match="still being written"):
        feedback_give(run=running, user=chat.owner, rating="up")
