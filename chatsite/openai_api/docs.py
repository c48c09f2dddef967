"""OpenAPI documentation of the /v1/ endpoints: request and response shapes, and
documentation-only views the schema hook adds (chatsite.api.openapi). The real
handlers are the async views in chatsite.openai_api.views."""
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.views import APIView

from chatsite.tenancy.auth import ApiKeyAuthentication

TEXT_PART = {"type": "object", "required": ["type", "text"],
             "properties": {"type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}}}


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "array", "items": TEXT_PART}]})
class ContentField(serializers.JSONField):
    pass


@extend_schema_field({"oneOf": [{"type": "string", "minLength": 1, "maxLength": 64},
                                {"type": "array", "maxItems": 4, "items": {"type": "string", "minLength": 1,
                                                                           "maxLength": 64}}]})
class StopField(serializers.JSONField):
    pass


class OpenAIChatMessage(serializers.Serializer):
    role = serializers.ChoiceField(["system", "developer", "user", "assistant"],
                                   help_text="`developer` is taken as `system`. Tool messages are not supported.")
    content = ContentField(help_text="A string, or a list of text parts.")


class OpenAIStreamOptions(serializers.Serializer):
    include_usage = serializers.BooleanField(required=False, help_text="Send a last chunk with `usage` "
                                                                       "(and `choices: []`) before [DONE].")


class OpenAIChatCompletionRequest(serializers.Serializer):
    model = serializers.CharField(help_text="A model id from GET /v1/models (a model pool's name).")
    messages = OpenAIChatMessage(many=True, help_text="The conversation, oldest first; the last must be the user's.")
    stream = serializers.BooleanField(required=False, default=False)
    stream_options = OpenAIStreamOptions(required=False, allow_null=True, help_text="Only with stream: true.")
    max_completion_tokens = serializers.IntegerField(required=False, min_value=1, allow_null=True,
                                                     help_text="At most the model's max_output_tokens.")
    max_tokens = serializers.IntegerField(required=False, min_value=1, allow_null=True,
                                          help_text="The older name of max_completion_tokens.")
    temperature = serializers.FloatField(required=False, min_value=0, max_value=2, allow_null=True)
    top_p = serializers.FloatField(required=False, min_value=0, max_value=1, allow_null=True,
                                   help_text="Greater than 0.")
    stop = StopField(required=False, allow_null=True)
    seed = serializers.IntegerField(required=False, min_value=0, max_value=2**63 - 1, allow_null=True)
    n = serializers.IntegerField(required=False, min_value=1, max_value=1, allow_null=True,
                                 help_text="Only 1: more choices per request are refused with 400.")
    ignore_eos = serializers.BooleanField(required=False, help_text="vLLM's extra parameter: generate "
                                                                    "exactly max_tokens.")


class OpenAIAssistantMessage(serializers.Serializer):
    role = serializers.ChoiceField(["assistant"])
    content = serializers.CharField(allow_blank=True)
    refusal = serializers.CharField(allow_null=True)


class OpenAIChoice(serializers.Serializer):
    index = serializers.IntegerField()
    message = OpenAIAssistantMessage()
    logprobs = serializers.JSONField(allow_null=True)
    finish_reason = serializers.ChoiceField(["stop", "length"])


class OpenAIUsage(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()


class OpenAIChatCompletion(serializers.Serializer):
    id = serializers.CharField(help_text="chatcmpl-<run id>: the run in GET /api/runs/{id}/ and the admin.")
    object = serializers.ChoiceField(["chat.completion"])
    created = serializers.IntegerField()
    model = serializers.CharField()
    system_fingerprint = serializers.CharField(allow_null=True)
    choices = OpenAIChoice(many=True)
    usage = OpenAIUsage()


class OpenAIErrorDetail(serializers.Serializer):
    message = serializers.CharField()
    type = serializers.CharField(help_text="invalid_request_error, authentication_error, rate_limit_error or "
                                           "server_error.")
    param = serializers.CharField(allow_null=True)
    code = serializers.CharField(allow_null=True)


class OpenAIErrorResponse(serializers.Serializer):
    error = OpenAIErrorDetail()


class OpenAIModel(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.ChoiceField(["model"])
    created = serializers.IntegerField()
    owned_by = serializers.CharField()


class OpenAIModelList(serializers.Serializer):
    object = serializers.ChoiceField(["list"])
    data = OpenAIModel(many=True)


def _errors(*statuses) -> dict:
    text = {400: "Invalid request (`param` names the field).", 401: "Missing, invalid or revoked API key.",
            404: "No such model for you.", 405: "Method not allowed.", 413: "Body too large.",
            415: "The body is not JSON.", 429: "The tenant's limits; see Retry-After.",
            500: "The model failed while generating.", 503: "Overloaded; see Retry-After."}
    return {s: OpenApiResponse(OpenAIErrorResponse, description=text[s]) for s in statuses}


STREAM_DESCRIPTION = """With `"stream": true`: `text/event-stream` of `data: {chat.completion.chunk}` lines, the
first with `delta.role`, then `delta.content` pieces, then one with `finish_reason`; with
`stream_options.include_usage` a last chunk with `usage` and `choices: []`; then `data: [DONE]`.
A failure mid-reply is a `data: {"error": {...}}` line before `[DONE]`. Comment lines (`: keep-alive`)
may come while the model is quiet."""


class ChatCompletionsDocs(APIView):
    authentication_classes = [ApiKeyAuthentication]

    @extend_schema(
        operation_id="openai_chat_completions", tags=["openai"], summary="Create a chat completion (OpenAI)",
        description="OpenAI-compatible. Every call is a run (source `openai`) on the same queues and workers as "
                    "the REST API, visible in the admin and counted in usage; a new chat holds its messages. "
                    "A client that hangs up does not stop the run. Errors use OpenAI's shape.\n\n"
                    + STREAM_DESCRIPTION,
        request=OpenAIChatCompletionRequest,
        examples=[OpenApiExample("Hello", request_only=True, value={
            "model": "flagship", "messages": [{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": "What does a for loop do?"}],
            "max_tokens": 16, "temperature": 0.7, "seed": 1})],
        responses={(200, "application/json"): OpenAIChatCompletion,
                   (200, "text/event-stream"): OpenApiResponse(OpenApiTypes.STR, description=STREAM_DESCRIPTION),
                   **_errors(400, 401, 404, 405, 413, 415, 429, 500, 503)},
    )
    def post(self, request):  # pragma: no cover - never routed
        raise NotImplementedError("served by chatsite.openai_api.views.chat_completions")


class ModelListDocs(APIView):
    authentication_classes = [ApiKeyAuthentication]

    @extend_schema(operation_id="openai_models_list", tags=["openai"], summary="List models (OpenAI)",
                   description="The enabled model pools your tenant may use.",
                   responses={200: OpenAIModelList, **_errors(401, 405)})
    def get(self, request):  # pragma: no cover - never routed
        raise NotImplementedError


class ModelDetailDocs(APIView):
    authentication_classes = [ApiKeyAuthentication]

    @extend_schema(operation_id="openai_models_retrieve", tags=["openai"], summary="Retrieve a model (OpenAI)",
                   responses={200: OpenAIModel, **_errors(401, 404, 405)})
    def get(self, request, model: str):  # pragma: no cover - never routed
        raise NotImplementedError
