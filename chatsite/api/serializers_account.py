"""Response and request shapes for the account endpoints: API keys and usage."""
from rest_framework import serializers

from chatsite.api import stated
from chatsite.tenancy.models import ApiKey
from chatsite.tenancy.services import MAX_KEY_NAME_CHARS


class ApiKeySerializer(serializers.ModelSerializer):
    """A key as its owner sees it: never the secret (only a SHA-256 of it is stored)."""

    prefix = serializers.CharField(read_only=True, help_text="The public part of the key: csk_<prefix>_…")
    last_used_at = serializers.DateTimeField(allow_null=True, read_only=True,
                                             help_text="When the key last authenticated a request (to the minute).")
    revoked_at = serializers.DateTimeField(allow_null=True, read_only=True,
                                           help_text="When the key was revoked; null while it is live.")

    class Meta:
        model = ApiKey
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
        extra_kwargs = {"name": {"help_text": "What the key is for."},
                        "created_at": {"help_text": "When the key was created."}}


class ApiKeyCreatedSerializer(ApiKeySerializer):
    secret = serializers.CharField(read_only=True, help_text="The whole key, for 'Authorization: Bearer KEY'. "
                                                             "Shown only in this response; store it now.")

    class Meta(ApiKeySerializer.Meta):
        fields = ApiKeySerializer.Meta.fields + ["secret"]


class ApiKeyCreateRequest(serializers.Serializer):
    name = stated.text(blank=False, max_length=MAX_KEY_NAME_CHARS,
                       help_text="What the key is for, e.g. 'nightly batch job'.")


class ModelUsageSerializer(serializers.Serializer):
    model = serializers.CharField(help_text="The model (pool) name.")
    runs = serializers.IntegerField(help_text="Runs queued this period.")
    prompt_tokens = serializers.IntegerField(help_text="Prompt tokens of those runs.")
    completion_tokens = serializers.IntegerField(help_text="Reply tokens of those runs.")
    total_tokens = serializers.IntegerField(help_text="prompt_tokens + completion_tokens.")


class UsageSerializer(serializers.Serializer):
    period_start = serializers.DateTimeField(help_text="Start of the current calendar month, UTC.")
    period_end = serializers.DateTimeField(help_text="Start of the next calendar month, UTC.")
    total_tokens = serializers.IntegerField(help_text="Prompt + completion tokens of all the tenant's runs.")
    models = ModelUsageSerializer(many=True)
