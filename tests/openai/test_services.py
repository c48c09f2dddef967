"""The OpenAI path's admission, in process: one transaction, a chat holding the
history, a run with source openai that the admin lists and usage counts."""
import pytest
from django.test import Client

from chatsite.chats.models import Chat
from chatsite.errors import InvalidInput
from chatsite.openai_api.completions.request import parse_completion_request
from chatsite.openai_api.completions.services import completion_submit
from chatsite.runs.admission.credentials import key_authenticate
from chatsite.runs.models import GenerationRun
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

BODY = {"model": "flagship", "messages": [{"role": "developer", "content": "Be brief."},
                                          {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                                                       {"type": "text", "text": "there"}]}],
        "max_completion_tokens": 12, "seed": 5}


@pytest.fixture
def key(api_key):
    return key_authenticate(api_key)  # the key as the /v1 views read it


def test_a_completion_is_a_run_in_a_chat_holding_the_history(key, pool):
    run = completion_submit(key=key, request=parse_completion_request(BODY)).run
    assert run.source == "openai" and run.max_tokens == 12 and run.seed == 5 and run.status == "queued"
    assert run.chat.owner == key.user and run.chat.tenant == key.tenant and run.pool == pool
    assert run.prompt_snapshot == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]


def test_a_refused_completion_leaves_no_chat(key, pool):
    with pytest.raises(InvalidInput):
        completion_submit(key=key, request=parse_completion_request({**BODY, "temperature": 9}))
    assert Chat.objects.count() == 0 and GenerationRun.objects.count() == 0


def test_the_admin_lists_openai_runs_and_usage_counts_them(key, pool, api_key):
    run = completion_submit(key=key, request=parse_completion_request(BODY)).run
    GenerationRun.objects.filter(pk=run.pk).update(status="completed", prompt_tokens=30, completion_tokens=12)
    staff = UserFactory(is_staff=True, is_superuser=True)
    admin = Client()
    admin.force_login(staff)
    page = admin.get("/admin/runs/generationrun/?source__exact=openai").content.decode()
    assert f'href="/admin/runs/generationrun/{run.pk}/change/' in page
    usage = Client(HTTP_AUTHORIZATION=f"Bearer {api_key}").get("/api/usage/").json()
    assert usage["total_tokens"] == 42 and usage["models"][0]["runs"] == 1
