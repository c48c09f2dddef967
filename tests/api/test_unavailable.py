"""Postgres or Redis briefly away: 503 + Retry-After in the API's shape, not a 500
page or a hung connection; a bug before the stream starts is a JSON 500."""
import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator
from django.db import OperationalError

from chatsite.runs.events_app import run_events
from tests.api.helpers import assert_openai_error, key_client

pytestmark = pytest.mark.django_db


def test_openai_endpoints_answer_503_while_postgres_is_away(api_key, monkeypatch):
    def down(*args, **kwargs):
        raise OperationalError("sorry, too many clients already")

    monkeypatch.setattr("chatsite.openai_api.completions.views.pools_for_tenant", down)
    resp = key_client(api_key).get("/v1/models")
    assert_openai_error(resp, 503, "service_unavailable")
    assert resp["Retry-After"] == "5"


@pytest.mark.parametrize("exc, status, code", [(OperationalError("down"), 503, "service_unavailable"),
                                               (RuntimeError("a bug"), 500, "server_error")])
def test_sse_errors_before_the_stream_starts_are_json(monkeypatch, exc, status, code):
    def fail(scope, run_id):
        raise exc

    monkeypatch.setattr("chatsite.runs.access.authorize_run", fail)  # the app reaches it through open_events
    comm = HttpCommunicator(run_events, "GET", "/api/runs/1/events")
    comm.scope["url_route"] = {"kwargs": {"run_id": 1}}
    resp = async_to_sync(comm.get_response)(timeout=5)
    assert resp["status"] == status
    assert b'"code": "%s"' % code.encode() in resp["body"]
