"""Response shapes (and documented request shapes) of the REST API."""
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chatsite.api import stated
from chatsite.api.output import FieldsBuiltOnce
from chatsite.chats.models import Chat, Message
from chatsite.chats.services import MAX_TITLE_CHARS
from chatsite.runs.access import events_token
from chatsite.runs.models import GenerationRun
from chatsite.runs.services.availability import run_waiting_for_worker
from chatsite.runs.validation import MAX_SEED, MIN_SEED
from chatsite.text import MAX_SYSTEM_PROMPT_CHARS


RUN_FIELD_HELP = {
    "chat": "The chat the run belongs to.",
    "attempt": "How many times a worker has started it (more than 1 after a worker died mid-run).",
    "user_message": "The id of the message it answers.",
    "assistant_message": "The id of the message holding the reply.",
    "max_tokens": "The reply length cap.",
    "seed": "The sampling seed.",
    "queued_at": "When the run was admitted.",
    "started_at": "When a worker took it (its latest attempt).",
    "first_token_at": "When the first token was streamed.",
    "finished_at": "When it ended.",
    "prompt_tokens": "Tokens of the prompt the model read (set when the run ends).",
    "completion_tokens": "Tokens of the reply (set when the run ends).",
    "finish_reason": "stop, length, budget, cancelled, interrupted (stopped by a queued message's 'send now') or "
                     "error; empty while the run goes on.",
    "error": "Why a failed run failed ('code: message'); empty otherwise.",
}


class RunSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    model = serializers.CharField(source="pool.name", help_text="The model (pool) generating the reply.")
    tier = serializers.CharField(help_text="interactive or batch.")
    events_url = serializers.SerializerMethodField()
    cancel_url = serializers.SerializerMethodField()
    tokens_per_second = serializers.SerializerMethodField()
    waiting_for_worker = serializers.SerializerMethodField()

    class Meta:
        model = GenerationRun
        fields = ["id", "chat", "status", "model", "tier", "attempt", "user_message", "assistant_message",
                  "max_tokens", "seed", "sampling", "queued_at", "started_at", "first_token_at", "finished_at",
                  "ttft_ms", "itl_ms", "tokens_per_second", "prompt_tokens", "completion_tokens",
                  "finish_reason", "error", "waiting_for_worker", "events_url", "cancel_url"]
        extra_kwargs = {name: {"help_text": text} for name, text in RUN_FIELD_HELP.items()}

    @extend_schema_field(serializers.CharField(
        help_text="GET it for the reply as Server-Sent Events. It carries a token that lets its holder read this "
                  "run's events for a while without credentials; after that the URL still works with a session "
                  "or API key, or GET the run again for a fresh one."))
    def get_events_url(self, run) -> str:
        return f"/api/runs/{run.pk}/events?token={events_token(run)}"

    @extend_schema_field(serializers.CharField(help_text="POST to it to stop the run."))
    def get_cancel_url(self, run) -> str:
        return f"/api/runs/{run.pk}/cancel"

    @extend_schema_field(serializers.BooleanField(
        help_text="True while the run is queued and no worker of its model is up yet (the model is starting from "
                  "zero); it starts when one is."))
    def get_waiting_for_worker(self, run) -> bool:
        return run_waiting_for_worker(run)

    @extend_schema_field(serializers.FloatField(allow_null=True, help_text="Decode speed after the first token."))
    def get_tokens_per_second(self, run):
        if run.first_token_at and run.finished_at and run.completion_tokens > 1:
            seconds = (run.finished_at - run.first_token_at).total_seconds()
            return round((run.completion_tokens - 1) / seconds, 1) if seconds > 0 else None
        return None


class MessageSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    run = serializers.SerializerMethodField()
    versions = serializers.SerializerMethodField()

    class Meta:
        model = Message
        fields = ["id", "role", "content", "token_count", "created_at", "parent", "versions", "run"]
        extra_kwargs = {"content": {"help_text": "The text; an assistant message fills in when its run ends "
                                                 "(stream it from the run's events_url meanwhile)."},
                        "token_count": {"help_text": "Tokens of the content."},
                        "created_at": {"help_text": "When the message was saved."},
                        "parent": {"help_text": "The message it follows (null for a first message)."}}

    @extend_schema_field(serializers.ListField(
        child=serializers.IntegerField(), help_text="The ids of this turn's versions (this message and its "
        "siblings: regenerated replies, edited messages), oldest first; POST .../select to show another."))
    def get_versions(self, msg) -> list[int]:
        """From the context's {message id: versions} (chatsite.chats.selectors.versions_of)."""
        return self.context.get("versions", {}).get(msg.pk) or [msg.pk]

    @extend_schema_field(RunSerializer(allow_null=True))
    def get_run(self, msg):
        run = getattr(msg, "run", None) if msg.role == Message.Role.ASSISTANT else None
        return RunSerializer(run).data if run is not None else None


class ChatSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    model = serializers.CharField(source="pool.name", help_text="The model new messages go to by default.")

    class Meta:
        model = Chat
        fields = ["id", "title", "model", "system_prompt", "temperature", "max_tokens", "listed", "pinned_at",
                  "archived_at", "created_at", "updated_at"]
        extra_kwargs = {"title": {"help_text": "The chat's name; the first message names it when empty."},
                        "system_prompt": {"help_text": "Instructions the model reads before the conversation."},
                        "temperature": {"help_text": "Sampling temperature of its runs; null: the model's default."},
                        "max_tokens": {"help_text": "Reply length of its runs; null: the model's default."},
                        "listed": {"help_text": "Shown in the web chat list; false for chats the "
                                                "OpenAI-compatible API made (one per call)."},
                        "pinned_at": {"help_text": "When it was pinned to the head of the chat list; null: "
                                                   "not pinned (PATCH `pinned`)."},
                        "archived_at": {"help_text": "When it was archived: it leaves the chat list, search "
                                                     "still finds it; null: not archived (PATCH `archived`)."},
                        "created_at": {"help_text": "When the chat was started."},
                        "updated_at": {"help_text": "When it last changed (a message, a rename)."}}


class ChatSearchResult(ChatSerializer):
    snippet = serializers.CharField(help_text="Text of a matching message around the match, with each match "
                                              "between U+2063 '[' and ']' U+2063; empty if only the title matched.")

    class Meta(ChatSerializer.Meta):
        fields = ChatSerializer.Meta.fields + ["snippet"]


class ChatSearchResponse(serializers.Serializer):
    results = ChatSearchResult(many=True)


class ChatPage(serializers.Serializer):
    count = serializers.IntegerField(help_text="How many chats there are in all.")
    next = serializers.CharField(allow_null=True, help_text="The URL of the next page, or null on the last page.")
    previous = serializers.CharField(allow_null=True, help_text="The URL of the previous page, or null.")
    results = ChatSerializer(many=True)


class MessagePage(serializers.Serializer):
    count = serializers.IntegerField(help_text="How many messages the chat's chosen path has in all.")
    next = serializers.CharField(allow_null=True, help_text="The URL of the next page, or null on the last page.")
    previous = serializers.CharField(allow_null=True, help_text="The URL of the previous page, or null.")
    results = MessageSerializer(many=True)


STREAM_HELP = ("true: answer 200 text/event-stream, `event: run` with the JSON the request answers otherwise, then "
               "the run's events as GET events_url sends them (resume there with Last-Event-ID).")
TITLE_HELP = "Optional; the first message names the chat when left empty."


class ChatCreateRequest(serializers.Serializer):
    model = stated.model()
    title = stated.text(required=False, max_length=MAX_TITLE_CHARS, help_text=TITLE_HELP)


class ChatSettings(serializers.Serializer):
    system_prompt = stated.text(required=False, allow_null=True, max_length=MAX_SYSTEM_PROMPT_CHARS,
                                help_text="Instructions the model reads first; empty or null: none.")
    temperature = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=2,
                                         help_text="0 to 2 for this chat's runs; null: the model's default.")
    max_tokens = serializers.IntegerField(required=False, allow_null=True, min_value=1,
                                          help_text="Reply length for this chat's runs, at most the model's "
                                                    "max_output_tokens; null: the model's default.")


class ChatUpdateRequest(ChatSettings):
    title = stated.text(required=False, max_length=MAX_TITLE_CHARS, help_text="A new name.")
    pinned = serializers.BooleanField(required=False, help_text="true: pin the chat to the head of the chat list; "
                                                                "false: unpin it.")
    archived = serializers.BooleanField(required=False, help_text="true: archive the chat (it leaves the chat "
                                                                  "list; search still finds it); false: restore it.")
    model = stated.model("The chat's next turns use it.", required=False)


class MessageCreateRequest(serializers.Serializer):
    content = stated.message_text(help_text="The user's message: not blank, no NUL bytes.")
    model = stated.model("Answers this one message with that model; the chat keeps its own model (PATCH the chat "
                         "to switch it for good).", required=False)
    max_tokens = serializers.IntegerField(required=False, min_value=1,
                                          help_text="Reply length cap, at most the model's max_output_tokens "
                                                    "(GET /api/models/). Default: the model's default.")
    temperature = serializers.FloatField(required=False, min_value=0, max_value=2,
                                         help_text="0 to 2; finite (NaN and Infinity are refused).")
    top_p = stated.TopP(required=False, help_text="Greater than 0 and at most 1.")
    stop = stated.Stop(required=False, help_text="Up to 4 strings that end the reply, or one string.")
    seed = serializers.IntegerField(required=False, min_value=MIN_SEED, max_value=MAX_SEED,
                                    help_text="Same seed, same prompt and sampling: the same reply.")
    tier = serializers.ChoiceField(choices=["interactive", "batch"], required=False,
                                   help_text="Scheduling tier; batch runs yield to interactive ones.")
    ignore_eos = serializers.BooleanField(required=False, help_text="Generate exactly max_tokens (benchmarks).")
    stream = serializers.BooleanField(required=False, help_text=STREAM_HELP)
    queue = serializers.BooleanField(required=False, help_text="true: while a reply is being written in the chat, "
                                     "queue the message (it starts when the replies before it end) instead of "
                                     "a 409.")


class FirstMessageRequest(MessageCreateRequest):
    stream = None  # the request's own `stream` says it
    queue = None  # a new chat has no reply to wait for


class ChatCreateWithSettings(ChatCreateRequest, ChatSettings):
    message = FirstMessageRequest(required=False, help_text="The chat's first message, sent in the same request "
                                   "(the fields POST .../messages/ takes).")
    stream = serializers.BooleanField(required=False, help_text="With `message`: " + STREAM_HELP)


class MessageEditRequest(MessageCreateRequest):
    queue = None  # an edit is a new version of a message sent: it waits for nothing


class RegenerateRequest(serializers.Serializer):
    model = stated.model("Answers with that model this once.", required=False)
    max_tokens = serializers.IntegerField(required=False, min_value=1, help_text="Reply length cap.")
    temperature = serializers.FloatField(required=False, min_value=0, max_value=2, help_text="0 to 2.")
    top_p = stated.TopP(required=False, help_text="Greater than 0, at most 1.")
    seed = serializers.IntegerField(required=False, min_value=MIN_SEED, max_value=MAX_SEED, help_text="Sampling seed.")
    tier = serializers.ChoiceField(choices=["interactive", "batch"], required=False,
                                   help_text="Scheduling tier; batch runs yield to interactive ones.")
    stream = serializers.BooleanField(required=False, help_text=STREAM_HELP)


class ContinueRequest(serializers.Serializer):
    max_tokens = serializers.IntegerField(required=False, min_value=1, help_text="How many more tokens at most.")
    stream = serializers.BooleanField(required=False, help_text=STREAM_HELP)


class MessagePostedResponse(serializers.Serializer):
    run = RunSerializer()
    user_message = MessageSerializer()
    assistant_message = MessageSerializer()


class ChatStartedResponse(ChatSerializer):
    run = RunSerializer(required=False, help_text="With `message`: the run generating the reply.")
    user_message = MessageSerializer(required=False, help_text="With `message`: the message sent.")
    assistant_message = MessageSerializer(required=False, help_text="With `message`: the reply, empty until "
                                                                    "its run ends.")

    class Meta(ChatSerializer.Meta):
        fields = ChatSerializer.Meta.fields + ["run", "user_message", "assistant_message"]


class PathResponse(serializers.Serializer):
    leaf = serializers.IntegerField(help_text="The last message of the chosen path now.")
    results = MessageSerializer(many=True, help_text="The chosen path from the selected message down, oldest first.")


class ModelSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The name to send as `model`.")
    display_name = serializers.CharField(help_text="A name for people.")
    context_length = serializers.IntegerField(help_text="Prompt + reply tokens the model can hold.")
    max_output_tokens = serializers.IntegerField(help_text="The largest max_tokens it accepts.")
    up = serializers.BooleanField(help_text="At least one worker with a ready engine serves it.")
    workers = serializers.IntegerField(help_text="Live workers serving it.")


class ErrorDetail(serializers.Serializer):
    code = serializers.CharField(help_text="A stable machine-readable name, e.g. invalid_request, not_found, "
                                           "model_not_found, context_length_exceeded, rate_limited.")
    message = serializers.CharField(help_text="What went wrong and what to do about it, for a person.")
    field = serializers.CharField(required=False, help_text="The request field (or header) at fault, if one is.")


class ErrorResponse(serializers.Serializer):
    error = ErrorDetail()
