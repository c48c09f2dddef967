"""The run's, the message's and the chat's hand-written representations equal what DRF builds from the
declared fields."""
import pytest
from django.utils import timezone
from rest_framework import serializers

from chatsite.api.serializers import ChatSearchResult, ChatSerializer, MessageSerializer, RunSerializer
from chatsite.chats.models import Message
from chatsite.runs.admission import run_submit

pytestmark = pytest.mark.django_db


def test_fast_run_representation_equals_the_fields_output(chat, monkeypatch):
    from types import SimpleNamespace

    from chatsite.runs import access

    # the events_url's token carries the second it was minted: both representations mint in the same one
    monkeypatch.setattr(access, "time", SimpleNamespace(time=lambda: 1_800_000_000.5))
    run = run_submit(chat=chat, content="hello", max_tokens=12, seed=4, stop=["x"])
    queued = RunSerializer(run)
    assert queued.data == serializers.ModelSerializer.to_representation(queued, run)
    assert queued.data["started_at"] is None and queued.data["tokens_per_second"] is None
    now = timezone.now()
    run.status, run.started_at, run.first_token_at, run.finished_at = "completed", now, now, now + timezone.timedelta(seconds=2)
    run.ttft_ms, run.itl_ms, run.prompt_tokens, run.completion_tokens, run.finish_reason = 40, 12.5, 9, 11, "length"
    finished = RunSerializer(run)
    assert finished.data == serializers.ModelSerializer.to_representation(finished, run)
    assert finished.data["tokens_per_second"] == 5.0 and finished.data["finished_at"].endswith("Z")


def test_fast_message_representation_equals_the_fields_output(chat):
    run = run_submit(chat=chat, content="hello", max_tokens=12, seed=4)
    for msg in (run.user_message, run.assistant_message, Message.objects.get(pk=run.assistant_message_id)):
        fast = MessageSerializer(msg, context={"versions": {msg.pk: [msg.pk, msg.pk + 100]}})
        assert fast.data == serializers.ModelSerializer.to_representation(fast, msg)
    assert fast.data["run"]["id"] == run.pk and fast.data["versions"] == [msg.pk, msg.pk + 100]
    assert MessageSerializer(run.user_message).data["run"] is None
    assert MessageSerializer(run.user_message).data["parent"] is None


def test_fast_chat_representation_equals_the_fields_output(chat):
    chat.system_prompt, chat.temperature, chat.max_tokens = "Be brief.", 0.25, 64
    chat.save()
    chat.refresh_from_db()
    for shown in (chat, type(chat).objects.create(tenant=chat.tenant, owner=chat.owner, pool=chat.pool)):
        fast = ChatSerializer(shown)
        assert fast.data == serializers.ModelSerializer.to_representation(fast, shown)
    assert ChatSerializer(chat).data["temperature"] == 0.25
    chat.snippet = "a [match]"
    found = ChatSearchResult(chat)
    assert found.data == serializers.ModelSerializer.to_representation(found, chat)
    assert found.data["snippet"] == "a [match]"
