"""The run's, the message's and the chat's output (chatsite.api.output: fields built once per
class) is what DRF builds from the same declared fields, follows Meta.fields, and calls each
SerializerMethodField on the serializer that was asked, with its context."""
import pytest
from django.utils import timezone
from rest_framework import serializers

from chatsite.api.serializers import ChatSearchResult, ChatSerializer, MessageSerializer, RunSerializer
from chatsite.chats.models import Message
from chatsite.runs.admission import run_submit

pytestmark = pytest.mark.django_db


def _stock(serializer, instance) -> dict:
    """What DRF's own Serializer.to_representation makes of it, fields built for this instance."""
    return serializers.Serializer.to_representation(serializer, instance)


def test_the_run_output_is_drfs(chat, monkeypatch):
    from types import SimpleNamespace

    from chatsite.runs import access

    # the events_url's token carries the second it was minted: both representations mint in the same one
    monkeypatch.setattr(access, "time", SimpleNamespace(time=lambda: 1_800_000_000.5))
    run = run_submit(chat=chat, content="hello", max_tokens=12, seed=4, stop=["x"])
    queued = RunSerializer(run)
    assert queued.data == _stock(queued, run)
    assert queued.data["started_at"] is None and queued.data["tokens_per_second"] is None
    now = timezone.now()
    run.status, run.started_at, run.first_token_at, run.finished_at = "completed", now, now, now + timezone.timedelta(seconds=2)
    run.ttft_ms, run.itl_ms, run.prompt_tokens, run.completion_tokens, run.finish_reason = 40, 12.5, 9, 11, "length"
    finished = RunSerializer(run)
    assert finished.data == _stock(finished, run)
    assert finished.data["tokens_per_second"] == 5.0 and finished.data["finished_at"].endswith("Z")
    assert list(finished.data) == RunSerializer.Meta.fields


def test_the_message_output_is_drfs_with_the_callers_versions(chat):
    run = run_submit(chat=chat, content="hello", max_tokens=12, seed=4)
    for msg in (run.user_message, run.assistant_message, Message.objects.get(pk=run.assistant_message_id)):
        fast = MessageSerializer(msg, context={"versions": {msg.pk: [msg.pk, msg.pk + 100]}})
        assert fast.data == _stock(fast, msg)
    assert fast.data["run"]["id"] == run.pk and fast.data["versions"] == [msg.pk, msg.pk + 100]
    # the fields are the class's, the context each serializer's own
    assert MessageSerializer(msg, context={"versions": {msg.pk: [7, msg.pk]}}).data["versions"] == [7, msg.pk]
    assert MessageSerializer(run.user_message).data["run"] is None
    assert MessageSerializer(run.user_message).data["parent"] is None
    many = MessageSerializer([run.user_message, msg], many=True, context={"versions": {msg.pk: [1, msg.pk]}}).data
    assert [m["versions"] for m in many] == [[run.user_message_id], [1, msg.pk]]


def test_the_chat_output_is_drfs(chat):
    chat.system_prompt, chat.temperature, chat.max_tokens = "Be brief.", 0.25, 64
    chat.save()
    chat.refresh_from_db()
    for shown in (chat, type(chat).objects.create(tenant=chat.tenant, owner=chat.owner, pool=chat.pool)):
        fast = ChatSerializer(shown)
        assert fast.data == _stock(fast, shown)
    assert ChatSerializer(chat).data["temperature"] == 0.25
    chat.snippet = "a [match]"
    found = ChatSearchResult(chat)
    assert found.data == _stock(found, chat)
    assert found.data["snippet"] == "a [match]"


def test_a_field_added_to_meta_fields_is_in_the_output(chat):
    class RunWithSource(RunSerializer):
        shouted = serializers.SerializerMethodField()

        class Meta(RunSerializer.Meta):
            fields = RunSerializer.Meta.fields + ["source", "idempotency_key", "shouted"]

        def get_shouted(self, run) -> str:
            return self.context["shout"] + run.status

    run = run_submit(chat=chat, content="hello", max_tokens=12, seed=4)
    out = RunWithSource(run, context={"shout": "!"}).data
    assert out["source"] == run.source and out["idempotency_key"] == "" and out["shouted"] == "!" + run.status
    assert list(out) == RunWithSource.Meta.fields
    assert {k: v for k, v in out.items() if k != "events_url"} == {
        k: v for k, v in _stock(RunWithSource(run, context={"shout": "!"}), run).items() if k != "events_url"}
    assert "source" not in RunSerializer(run).data  # the class it extends is unchanged


def test_a_nested_serializer_is_refused_by_name():
    from chatsite.api.output import FieldsBuiltOnce

    class Nested(FieldsBuiltOnce, serializers.Serializer):
        run = RunSerializer()

    with pytest.raises(TypeError, match="Nested.run"):
        Nested(object()).data
