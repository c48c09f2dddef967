"""OpenAPI documentation of the /v1/ endpoints: request and response shapes, and
documentation-only views the schema hook adds (chatsite.api.schema_hook). The real
handlers are the async views in chatsite.openai_api.completions.views."""
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.parsers import JSONParser  # documentation only: these views are never routed
from rest_framework.views import APIView

from chatsite.openai_api.vllm.docs import VllmRequestFields
from chatsite.runs.admission.credentials import ApiKeyAuthentication
from chatsite.runs.choices import MAX_CHOICES
from chatsite.runs.validation import MAX_SEED, MIN_SEED

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
    role = serializers.ChoiceField(["system", "developer", "user", "assistant", "tool"], help_text=(
        "`developer` is taken as `system`. A conversation ending with the assistant's message is a prefill the "
        "model carries on; a system message alone is answered."))
    content = ContentField(help_text="A string, or a list of text parts.")


class OpenAIStreamOptions(serializers.Serializer):
    include_usage = serializers.BooleanField(required=False, help_text="Send a last chunk with `usage` "
                                                                       "(and `choices: []`) before [DONE].")
    continuous_usage_stats = serializers.BooleanField(required=False, help_text=(
        "vLLM's, with include_usage: every chunk after the first carries the usage so far."))


class OpenAIChatCompletionRequest(VllmRequestFields):
    model = serializers.CharField(help_text="A model id from GET /v1/models (a model pool's name).")
    messages = OpenAIChatMessage(many=True, help_text="The conversation, oldest first; the last must be the user's.")
    stream = serializers.BooleanField(required=False, default=False, help_text="Send the reply as it is generated "
                                                                             "(text/event-stream).")
    stream_options = OpenAIStreamOptions(required=False, allow_null=True, help_text="Only with stream: true.")
    max_completion_tokens = serializers.IntegerField(required=False, min_value=1, allow_null=True,
                                                     help_text="At most the model's max_output_tokens.")
    max_tokens = serializers.IntegerField(required=False, min_value=1, allow_null=True,
                                          help_text="The older name of max_completion_tokens.")
    temperature = serializers.FloatField(required=False, min_value=0, max_value=2, allow_null=True,
                                         help_text="0 to 2; default: the model's.")
    top_p = serializers.FloatField(required=False, min_value=0, max_value=1, allow_null=True,
                                   help_text="Greater than 0.")
    stop = StopField(required=False, allow_null=True, help_text="Up to 4 strings that end the reply.")
    seed = serializers.IntegerField(required=False, min_value=MIN_SEED, max_value=MAX_SEED, allow_null=True,
                                    help_text="Any 64-bit integer. Same seed, prompt and sampling: the same reply.")
    n = serializers.IntegerField(required=False, min_value=1, max_value=MAX_CHOICES, allow_null=True,
                                 help_text=f"1 to {MAX_CHOICES} choices, one run each; the prompt is counted once "
                                           "and max_tokens reserved for each.")
    ignore_eos = serializers.BooleanField(required=False, help_text="vLLM's extra parameter: generate "
                                                                    "exactly max_tokens.")
    top_k = serializers.IntegerField(required=False, min_value=-1, allow_null=True,
                                     help_text="vLLM's extra parameter: 0 or -1 off, else the k likeliest tokens.")
    min_p = serializers.FloatField(required=False, min_value=0, max_value=1, allow_null=True,
                                   help_text="vLLM's extra parameter: 0 to 1.")
    frequency_penalty = serializers.FloatField(required=False, min_value=-2, max_value=2, allow_null=True,
                                               help_text="-2 to 2; 0 is off.")
    presence_penalty = serializers.FloatField(required=False, min_value=-2, max_value=2, allow_null=True,
                                              help_text="-2 to 2; 0 is off.")
    repetition_penalty = serializers.FloatField(required=False, allow_null=True, help_text="vLLM's extra "
                                                "parameter: greater than 0, at most 10; 1 is off.")
    response_format = serializers.JSONField(required=False, allow_null=True, help_text=(
        '{"type": "text"}, {"type": "json_object"} or {"type": "json_schema", "json_schema": {"name", "schema", '
        '"strict"}}: the reply is constrained to JSON (matching the schema) by vLLM structured outputs.'))
    tools = serializers.JSONField(required=False, allow_null=True, help_text=(
        '[{"type": "function", "function": {"name", "description", "parameters"}}]: functions the model may call, '
        "on a model whose chat template has tools (else 400 tools). parameters: a JSON Schema of an object."))
    tool_choice = serializers.JSONField(required=False, allow_null=True, help_text=(
        '"none", "auto" (the default with tools), "required" or {"type": "function", "function": {"name"}}; '
        "required and a named function constrain the reply to a valid call (vLLM structured outputs)."))
    parallel_tool_calls = serializers.BooleanField(required=False, allow_null=True, help_text=(
        "Default true; false: one call at most."))
    logprobs = serializers.BooleanField(required=False, allow_null=True, help_text=(
        "true: choices[0].logprobs.content holds every reply token's log probability (streamed: each chunk's "
        "tokens')."))
    top_logprobs = serializers.IntegerField(required=False, min_value=0, max_value=20, allow_null=True, help_text=(
        "0 to 20, only with logprobs: true: the most likely tokens at each position, with theirs."))
    user = serializers.CharField(required=False, allow_null=True, help_text="Accepted, not used.")
    echo = serializers.BooleanField(required=False, allow_null=True, help_text=(
        "vLLM's: a prefill (the conversation's last, assistant message) comes before the reply's text."))
    add_generation_prompt = serializers.BooleanField(required=False, allow_null=True, help_text=(
        "vLLM's: true after a last assistant message asks for a new reply rather than carrying it on; false after "
        "a user's message leaves the reply's opening out of the prompt."))
    continue_final_message = serializers.BooleanField(required=False, allow_null=True, help_text=(
        "vLLM's: carry on the last (assistant) message, as without it; false: a new reply."))


class OpenAIToolCall(serializers.Serializer):
    id = serializers.CharField(help_text="call_<run id>_<n>.")
    type = serializers.ChoiceField(["function"])
    function = serializers.JSONField(help_text='{"name", "arguments"}: the arguments a JSON object as text.')


class OpenAIAssistantMessage(serializers.Serializer):
    role = serializers.ChoiceField(["assistant"])
    content = serializers.CharField(allow_blank=True, allow_null=True, help_text=(
        "The reply, as saved on the run; with tools, the words outside the calls (null when there are only calls)."))
    tool_calls = OpenAIToolCall(many=True, required=False, help_text="The calls, when the run offered tools.")
    refusal = serializers.CharField(allow_null=True, help_text="Always null.")


class OpenAIChoice(serializers.Serializer):
    index = serializers.IntegerField(help_text="The choice's index, 0 to n-1.")
    message = OpenAIAssistantMessage()
    logprobs = serializers.JSONField(allow_null=True, help_text=(
        'Null unless asked for; then {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", '
        '"logprob", "bytes"}]}], "refusal": null}.'))
    finish_reason = serializers.ChoiceField(["stop", "length", "tool_calls"])


class OpenAIUsage(serializers.Serializer):
    prompt_tokens = serializers.IntegerField(help_text="The run's prompt tokens (each prompt's once).")
    completion_tokens = serializers.IntegerField(help_text="The run's reply tokens.")
    total_tokens = serializers.IntegerField(help_text="The sum of both.")
    prompt_tokens_details = serializers.JSONField(help_text=(
        "{cached_tokens: the prompt tokens the engine's prefix cache served, audio_tokens: 0}."))
    completion_tokens_details = serializers.JSONField(help_text="Reasoning, audio and prediction tokens: all 0.")


class OpenAIChatCompletion(serializers.Serializer):
    id = serializers.CharField(help_text="chatcmpl-<run id>: the run in GET /api/runs/{id}/ and the admin.")
    object = serializers.ChoiceField(["chat.completion"])
    created = serializers.IntegerField(help_text="When the run was queued, Unix seconds.")
    model = serializers.CharField(help_text="The model (pool) that answered.")
    system_fingerprint = serializers.CharField(allow_null=True, help_text="Always null.")
    choices = OpenAIChoice(many=True)
    usage = OpenAIUsage()


class OpenAIErrorDetail(serializers.Serializer):
    message = serializers.CharField(help_text="What went wrong and what to do about it.")
    type = serializers.CharField(help_text="invalid_request_error, authentication_error, rate_limit_error or "
                                           "server_error.")
    param = serializers.CharField(allow_null=True, help_text="The request parameter at fault, if one is.")
    code = serializers.CharField(allow_null=True, help_text="A stable machine-readable code, e.g. "
                                                            "model_not_found, invalid_api_key.")


class OpenAIErrorResponse(serializers.Serializer):
    error = OpenAIErrorDetail()


class OpenAIModel(serializers.Serializer):
    id = serializers.CharField(help_text="The name to send as `model`.")
    object = serializers.ChoiceField(["model"])
    created = serializers.IntegerField(help_text="When the pool was created, Unix seconds.")
    owned_by = serializers.CharField(help_text="Always 'chatsite'.")


class OpenAIModelList(serializers.Serializer):
    object = serializers.ChoiceField(["list"])
    data = OpenAIModel(many=True)


def _errors(*statuses) -> dict:
    text = {400: "Invalid request (`param` names the field).", 401: "Missing, invalid or revoked API key.",
            404: "No such model for you.", 405: "Method not allowed.", 413: "Body too large.",
            409: "The Idempotency-Key was used with another request.",
            415: "The body is not JSON.", 429: "The tenant's limits; see Retry-After.",
            500: "The model failed while generating.",
            503: "Overloaded, or briefly unavailable; see Retry-After."}
    return {s: OpenApiResponse(OpenAIErrorResponse, description=text[s]) for s in statuses}


STREAM_DESCRIPTION = """With `"stream": true`: `text/event-stream` of `data: {chat.completion.chunk}` lines, the
first with `delta.role`, then `delta.content` pieces, then one with `finish_reason`; with
`stream_options.include_usage` a last chunk with `usage` and `choices: []`; then `data: [DONE]`.
With `n` > 1 the choices' chunks are interleaved, each naming its `choices[0].index`, and the usage
chunk follows the last choice's `finish_reason`.
A failure mid-reply is a `data: {"error": {...}}` line before `[DONE]`. Comment lines (`: keep-alive`)
may come while the model is quiet."""


# The schema of an event-stream response describes one event, as an SSE parser reads it.
CHUNK_EVENT_SCHEMA = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "event": {"type": "string", "enum": ["message"]},
        "data": {"type": "string", "description": "A chat.completion.chunk (or error) object as JSON, "
                                                  "or `[DONE]` last."},
    },
}


class ChatCompletionsDocs(APIView):
    authentication_classes = [ApiKeyAuthentication]
    parser_classes = [JSONParser]

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
                   (200, "text/event-stream"): OpenApiResponse(CHUNK_EVENT_SCHEMA, description=STREAM_DESCRIPTION),
                   **_errors(400, 401, 404, 405, 409, 413, 415, 429, 500, 503)},
    )
    def post(self, request):  # pragma: no cover - never routed
        raise NotImplementedError("served by chatsite.openai_api.completions.views.chat_completions")


class OpenAITextCompletionRequest(VllmRequestFields):
    model = serializers.CharField(help_text="A model id from GET /v1/models (a model pool's name).")
    prompt = serializers.JSONField(help_text=(
        "A string, a list of token ids, or a list of up to 32 of either (n choices each, indexed prompt by prompt): "
        "sent to the model as it is, without the chat template."))
    stream = serializers.BooleanField(required=False, default=False, help_text="Send the text as it is "
                                                                             "generated (text/event-stream).")
    stream_options = OpenAIStreamOptions(required=False, allow_null=True, help_text="Only with stream: true.")
    max_tokens = serializers.IntegerField(required=False, min_value=1, allow_null=True,
                                          help_text="Default: the model's (not OpenAI's 16).")
    temperature = serializers.FloatField(required=False, min_value=0, max_value=2, allow_null=True,
                                         help_text="0 to 2; default: the model's.")
    top_p = serializers.FloatField(required=False, min_value=0, max_value=1, allow_null=True,
                                   help_text="Greater than 0.")
    stop = StopField(required=False, allow_null=True, help_text="Up to 4 strings that end the text.")
    seed = serializers.IntegerField(required=False, min_value=MIN_SEED, max_value=MAX_SEED, allow_null=True,
                                    help_text="Any 64-bit integer. Same seed, prompt and sampling: the same text.")
    n = serializers.IntegerField(required=False, min_value=1, max_value=MAX_CHOICES, allow_null=True,
                                 help_text=f"1 to {MAX_CHOICES} choices, as for chat completions.")
    echo = serializers.BooleanField(required=False, help_text=(
        "The prompt before each choice's text; with logprobs, the prompt's log probabilities first (the first "
        "token's null)."))
    response_format = serializers.JSONField(required=False, allow_null=True, help_text="As on chat completions "
                                                                                      "(vLLM's).")
    suffix = serializers.CharField(required=False, allow_null=True, help_text="Refused (400) unless empty.")
    logprobs = serializers.IntegerField(required=False, min_value=0, max_value=5, allow_null=True, help_text=(
        "0 to 5: every token's log probability and the N most likely tokens at each position."))


class OpenAITextChoice(serializers.Serializer):
    text = serializers.CharField(allow_blank=True, help_text="The text, as saved on the run.")
    index = serializers.IntegerField(help_text="The choice's index, 0 to n-1.")
    logprobs = serializers.JSONField(allow_null=True, help_text=(
        'Null unless asked for; then {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], '
        '"text_offset"} (offsets count characters into the completion text).'))
    finish_reason = serializers.ChoiceField(["stop", "length"])


class OpenAITextCompletion(serializers.Serializer):
    id = serializers.CharField(help_text="cmpl-<run id>: the run in GET /api/runs/{id}/ and the admin.")
    object = serializers.ChoiceField(["text_completion"])
    created = serializers.IntegerField(help_text="When the run was queued, Unix seconds.")
    model = serializers.CharField(help_text="The model (pool) that answered.")
    system_fingerprint = serializers.CharField(allow_null=True, help_text="Always null.")
    choices = OpenAITextChoice(many=True)
    usage = OpenAIUsage()


class TextCompletionsDocs(APIView):
    authentication_classes = [ApiKeyAuthentication]
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="openai_completions", tags=["openai"], summary="Create a text completion (OpenAI)",
        description="OpenAI-compatible text completions: the prompt goes to the model as it is (no chat "
                    "template). A run like every other (source `openai`). With `\"stream\": true`: `data: "
                    "{text_completion}` lines with the new text in `choices[0].text`, one with `finish_reason`, "
                    "with `stream_options.include_usage` a last one with `usage` and `choices: []`, then "
                    "`data: [DONE]`.",
        request=OpenAITextCompletionRequest,
        responses={(200, "application/json"): OpenAITextCompletion,
                   (200, "text/event-stream"): OpenApiResponse(CHUNK_EVENT_SCHEMA, description="As chat."),
                   **_errors(400, 401, 404, 405, 409, 413, 415, 429, 500, 503)},
    )
    def post(self, request):  # pragma: no cover - never routed
        raise NotImplementedError("served by chatsite.openai_api.completions.views.text_completions")


class ModelListDocs(APIView):
    authentication_classes = [ApiKeyAuthentication]

    @extend_schema(operation_id="openai_models_list", tags=["openai"], summary="List models (OpenAI)",
                   description="The enabled model pools your tenant may use.",
                   responses={200: OpenAIModelList, **_errors(401, 405, 503)})
    def get(self, request):  # pragma: no cover - never routed
        raise NotImplementedError


class ModelDetailDocs(APIView):
    authentication_classes = [ApiKeyAuthentication]

    @extend_schema(operation_id="openai_models_retrieve", tags=["openai"], summary="Retrieve a model (OpenAI)",
                   responses={200: OpenAIModel, **_errors(401, 404, 405, 503)})
    def get(self, request, model: str):  # pragma: no cover - never routed
        raise NotImplementedError
