"""A pool's default sampling reaches every run that does not name a parameter, on every
surface: the REST API (and the web chat, which posts to it) cannot name min_p or the
penalties at all, yet a demo pool's defaults rely on them."""
import pytest

from chatsite.openai_api.completions.request import parse_completion_request
from chatsite.openai_api.completions.services import completion_submit
from chatsite.runs.admission.credentials import key_authenticate
from chatsite.runs.models import GenerationRun
from tests.api.helpers import key_client
from tests.factories import queueing_pool

pytestmark = pytest.mark.django_db

DEFAULTS = {"temperature": 0.3, "top_p": 0.9, "min_p": 0.05, "repetition_penalty": 1.1, "frequency_penalty": 0.2,
            "max_tokens": 33}
KNOBS = ("temperature", "top_p", "min_p", "repetition_penalty", "frequency_penalty", "presence_penalty", "top_k")


@pytest.fixture
def client(api_key, db):
    queueing_pool("flagship", default_sampling=DEFAULTS)
    return key_client(api_key)


def knobs(run_id: int) -> dict:
    run = GenerationRun.objects.get(pk=run_id)
    return {"max_tokens": run.max_tokens, **{k: run.sampling[k] for k in KNOBS}}


def test_a_rest_turn_gets_the_pools_defaults(client):
    resp = client.post("/api/chats/", {"model": "flagship", "message": {"content": "What is the capital of France?"}},
                       content_type="application/json")
    assert resp.status_code == 201, resp.content
    assert knobs(resp.json()["run"]["id"]) == {**DEFAULTS, "presence_penalty": 0.0, "top_k": 0}


def test_a_v1_call_gets_the_defaults_it_does_not_name(client, api_key):
    body = {"model": "flagship", "repetition_penalty": 1.0, "temperature": 0,
            "messages": [{"role": "user", "content": "Hi"}]}
    run = completion_submit(key=key_authenticate(api_key), request=parse_completion_request(body)).run
    assert knobs(run.pk) == {**DEFAULTS, "temperature": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0,
                             "top_k": 0}
