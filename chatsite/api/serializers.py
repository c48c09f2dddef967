"""Response shapes (and documented request shapes) of the REST API."""
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chatsite.chats.models import Chat, Message
from chatsite.runs.models import GenerationRun


class RunSerializer(serializers.ModelSerializer):
    model = serializers.CharField(source="pool.name")
    priority = serializers.CharField(source="tier")
    events_url = serializers.SerializerMethodField()
    cancel_url = serializers.SerializerMethodField()
    tokens_per_second = serializers.SerializerMethodField()

    class Meta:
        model = GenerationRun
        fields = ["id", "chat", "status", "model", "priority", "attempt", "user_message", "assistant_message",
                  "max_tokens", "seed", "sampling", "queued_at", "started_at", "first_token_at", "finished_at",
                  "ttft_ms", "itl_ms", "tokens_per_second", "prompt_tokens", "completion_tokens",
                  "finish_reason", "error", "events_url", "cancel_url"]

    def get_events_url(self, run) -> str:
        return f"/api/runs/{run.pk}/events"

    def get_cancel_url(self, run) -> str:
        return f"/api/runs/{run.pk}/cancel"

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_tokens_per_second(self, run):
        if run.first_token_at and run.finished_at and run.completion_tokens > 1:
            seconds = (run.finished_at - run.first_token_at).total_seconds()
            return round((run.completion_tokens - 1) / seconds, 1) if seconds > 0 else None
        return None


class MessageSerializer(serializers.ModelSerializer):
    run = serializers.SerializerMethodField()

    class Meta:
        model = Message
        fields = ["id", "role", "content", "token_count", "created_at", "run"]

    @extend_schema_field(RunSerializer(allow_null=True))
    def get_run(self, msg):
        run = getattr(msg, "run", None) if msg.role == Message.Role.ASSISTANT else None
        return RunSerializer(run).data if run is not None else None


class ChatSerializer(serializers.ModelSerializer):
    model = serializers.CharField(source="pool.name")

    class Meta:
        model = Chat
        fields = ["id", "title", "model", "created_at", "updated_at"]


class ChatCreateRequest(serializers.Serializer):
    model = serializers.CharField(help_text="A model name from GET /api/models/.")
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)


class ChatUpdateRequest(serializers.Serializer):
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)
    model = serializers.CharField(required=False)


class MessageCreateRequest(serializers.Serializer):
    content = serializers.CharField(help_text="The user's message (1 to 32000 characters, no NUL bytes).")
    max_tokens = serializers.IntegerField(required=False, min_value=1, help_text="At most the model's max_output_tokens.")
    temperature = serializers.FloatField(required=False, min_value=0, max_value=2)
    top_p = serializers.FloatField(required=False, min_value=0, max_value=1, help_text="Greater than 0.")
    stop = serializers.ListField(child=serializers.CharField(max_length=64), required=False, max_length=4)
    seed = serializers.IntegerField(required=False, min_value=0)
    priority = serializers.ChoiceField(choices=["interactive", "batch"], required=False)
    ignore_eos = serializers.BooleanField(required=False, help_text="Generate exactly max_tokens (benchmarks).")


class MessagePostedResponse(serializers.Serializer):
    run = RunSerializer()
    user_message = MessageSerializer()
    assistant_message = MessageSerializer()


class ModelSerializer(serializers.Serializer):
    id = serializers.CharField()
    display_name = serializers.CharField()
    context_length = serializers.IntegerField()
    max_output_tokens = serializers.IntegerField()
    up = serializers.BooleanField(help_text="At least one worker with a ready engine serves it.")
    workers = serializers.IntegerField()


class ErrorDetail(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    field = serializers.CharField(required=False)


class ErrorResponse(serializers.Serializer):
    error = ErrorDetail()
