"""Response shapes of share links (chatsite.chats.sharing) and of what a link shows
(chatsite.runs.shared_view)."""
from rest_framework import serializers

from chatsite.chats.models import ChatShare


class ShareSerializer(serializers.ModelSerializer):
    class Meta:
        model = ChatShare
        fields = ["id", "created_at", "revoked_at"]
        extra_kwargs = {"created_at": {"help_text": "When the link was made."},
                        "revoked_at": {"help_text": "When it was revoked; null while it works."}}


class ShareCreatedSerializer(ShareSerializer):
    token = serializers.CharField(help_text="The link's secret, shown once (only a hash is kept).")
    url = serializers.CharField(help_text="The read-only page anyone with the link can open, no account needed.")
    api_url = serializers.CharField(help_text="The same chat as JSON: GET /api/shared/{token}.")

    class Meta(ShareSerializer.Meta):
        fields = [*ShareSerializer.Meta.fields, "token", "url", "api_url"]


class SharedRun(serializers.Serializer):
    id = serializers.IntegerField(help_text="The run writing (or that wrote) the reply.")
    status = serializers.CharField(help_text="queued, running, completed, failed or cancelled.")
    model = serializers.CharField(help_text="The model (pool) that writes the reply.")
    finish_reason = serializers.CharField(help_text="stop, length, budget, cancelled or error; empty while it goes on.")
    events_url = serializers.CharField(allow_null=True, help_text=(
        "While the reply is being written: GET it for the reply as Server-Sent Events (the events of GET "
        "/api/runs/{id}/events), no account needed, from its start or after `live.last_event_id`. It stops "
        "when the link is revoked. Null once the run ended."))


class SharedLive(serializers.Serializer):
    have = serializers.IntegerField(help_text="Tokens of the reply in `content`.")
    last_event_id = serializers.CharField(allow_null=True, help_text="The stream id they end at: send it as "
                                          "Last-Event-ID to follow the rest.")


class SharedMessage(serializers.Serializer):
    id = serializers.IntegerField(help_text="The message's id.")
    role = serializers.CharField(help_text="user, assistant or tool.")
    content = serializers.CharField(help_text="The text; a reply in progress: its text so far.")
    created_at = serializers.DateTimeField(help_text="When the message was saved.")
    run = SharedRun(allow_null=True, help_text="An assistant message's run; null for the others.")
    live = SharedLive(allow_null=True, help_text="A reply in progress: where `content` ends; null otherwise.")


class SharedChatSerializer(serializers.Serializer):
    title = serializers.CharField(help_text="The chat's name.")
    model = serializers.CharField(help_text="The chat's model, by its display name.")
    shared_at = serializers.DateTimeField(help_text="When the link was made.")
    messages = SharedMessage(many=True, help_text="The chat's chosen path now, oldest first.")
    more_before = serializers.BooleanField(help_text="The path has older messages than the link shows.")
