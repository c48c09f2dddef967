"""Response and request shapes of a chat's queued messages (chatsite.runs.services.queued)."""
from rest_framework import serializers

from chatsite.api import stated
from chatsite.api.output import FieldsBuiltOnce
from chatsite.chats.models import QueuedMessage


class QueuedMessageSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    """Context: `places` ({id: place}) of the chat's waiting messages."""
    place = serializers.SerializerMethodField(help_text="Its place in the chat's queue (1: it starts next); null "
                                                        "once it left the queue.")

    class Meta:
        model = QueuedMessage
        fields = ["id", "chat", "content", "state", "place", "run", "interrupted_run", "error", "created_at",
                  "updated_at"]
        extra_kwargs = {
            "chat": {"help_text": "The chat it waits in."},
            "state": {"help_text": "queued (waiting), started (its run is `run`), withdrawn, or refused (when its "
                                   "turn came; `error` says why; POST .../retry queues it again)."},
            "run": {"help_text": "The run it started (its reply's), once started."},
            "interrupted_run": {"help_text": "The run its 'send now' stopped (that reply ends `interrupted`)."},
            "error": {"help_text": "refused: why, when its turn came (retry or withdraw it). queued: why it still "
                                   "waits after its turn came (a limit that passes within minutes); else empty."},
            "id": {"help_text": "The queued message's id (not the id of the message it becomes)."},
            "content": {"help_text": "The message's text."},
            "created_at": {"help_text": "When it was queued."},
            "updated_at": {"help_text": "When it last changed (edited, sent now, started, withdrawn, refused)."},
        }

    def get_place(self, item) -> int | None:
        return self.context.get("places", {}).get(item.pk)


class QueuedResponse(serializers.Serializer):
    queued_message = QueuedMessageSerializer(help_text="The message, waiting its turn in the chat's queue.")


class QueueList(serializers.Serializer):
    results = QueuedMessageSerializer(many=True, help_text="The chat's refused messages (until retried or withdrawn), "
                                                           "then its waiting ones, the next first.")


class QueuedEditRequest(serializers.Serializer):
    content = stated.message_text(help_text="The message's new text: not blank, no NUL bytes.")
