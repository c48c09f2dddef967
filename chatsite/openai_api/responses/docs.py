"""OpenAPI documentation of the Responses endpoints under /v1/ (documentation-only
views the schema hook adds; the real handlers are chatsite.openai_api.responses.views)."""
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.parsers import JSONParser  # documentation only: these views are never routed
from rest_framework.views import APIView

from chatsite.openai_api.completions.docs import OpenAIErrorResponse
from chatsite.openai_api.responses.events import MAX_SEQUENCE
from chatsite.runs.admission.credentials import ApiKeyAuthentication

TAGS = ["openai"]
INPUT_PART = {"type": "object", "required": ["type", "text"],
              "properties": {"type": {"type": "string", "enum": ["input_text", "output_text"]},
                             "text": {"type": "string"}}}
INPUT_ITEM = {"oneOf": [
    {"type": "object", "required": ["role", "content"], "properties": {
        "type": {"type": "string", "enum": ["message"]},
        "role": {"type": "string", "enum": ["user", "assistant", "system", "developer"]},
        "content": {"oneOf": [{"type": "string"}, {"type": "array", "items": INPUT_PART}]}}},
    {"type": "object", "required": ["type", "call_id", "name", "arguments"], "properties": {
        "type": {"type": "string", "enum": ["function_call"]}, "call_id": {"type": "string"},
        "name": {"type": "string"}, "arguments": {"type": "string"}}},
    {"type": "object", "required": ["type", "call_id", "output"], "properties": {
        "type": {"type": "string", "enum": ["function_call_output"]}, "call_id": {"type": "string"},
        "output": {"type": "string"}}}]}
FUNCTION_TOOL = {"type": "object", "required": ["type", "name"], "properties": {
    "type": {"type": "string", "enum": ["function"]}, "name": {"type": "string"}, "description": {"type": "string"},
    "parameters": {"type": "object"}, "strict": {"type": "boolean"}}}


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "array", "items": INPUT_ITEM}]})
class InputField(serializers.JSONField):
    pass


@extend_schema_field({"type": "array", "items": FUNCTION_TOOL})
class ToolsField(serializers.JSONField):
    pass


class ResponseCreateRequest(serializers.Serializer):
    model = serializers.CharField(help_text="A model id from GET /v1/models.")
    input = InputField(help_text="A string (the user's message), or items, oldest first: messages (text parts), "
                                 "function_call and function_call_output items. Ending with the assistant's "
                                 "message, a prefill the model carries on.")
    instructions = serializers.CharField(required=False, allow_null=True, help_text="The system prompt of this "
                                                                                    "turn (not carried over by "
                                                                                    "previous_response_id).")
    max_output_tokens = serializers.IntegerField(required=False, allow_null=True, min_value=1,
                                                 help_text="At most the model's max_output_tokens.")
    temperature = serializers.FloatField(required=False, allow_null=True, help_text="0 to 2.")
    top_p = serializers.FloatField(required=False, allow_null=True, help_text="Greater than 0, at most 1.")
    stream = serializers.BooleanField(required=False, help_text="Send events as they come (text/event-stream).")
    background = serializers.BooleanField(required=False, help_text="Answer at once (status queued); the run goes "
                                                                    "on without the client.")
    store = serializers.BooleanField(required=False, help_text=(
        "Default true. false: answered, then not readable (404) and its text forgotten; not with background."))
    tools = ToolsField(required=False, allow_null=True, help_text=(
        "Function tools ({type: function, name, description, parameters, strict}), on a model whose chat template "
        "has tools; a call is a function_call output item, its result a function_call_output input item."))
    tool_choice = serializers.JSONField(required=False, allow_null=True, help_text=(
        '"none", "auto" (default), "required" or {"type": "function", "name"}.'))
    parallel_tool_calls = serializers.BooleanField(required=False, allow_null=True, help_text="false: one call.")
    text = serializers.JSONField(required=False, allow_null=True, help_text=(
        '{"format": {"type": "text" | "json_object"}} or {"format": {"type": "json_schema", "name", "schema", '
        '"strict"}}: the reply constrained to JSON by vLLM structured outputs.'))
    previous_response_id = serializers.CharField(required=False, allow_null=True,
                                                 help_text="Continue that response's conversation, after its reply.")
    metadata = serializers.DictField(child=serializers.CharField(), required=False, allow_null=True,
                                     help_text="Up to 16 string pairs, echoed back.")
    include = serializers.ListField(child=serializers.CharField(), required=False, allow_null=True, help_text=(
        'Only ["message.output_text.logprobs"]: the output_text part and each delta event carry their tokens\' '
        "logprobs."))
    top_logprobs = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=20, help_text=(
        "0 to 20 alternatives per token, with include message.output_text.logprobs."))


class ResponseObject(serializers.Serializer):
    id = serializers.CharField(help_text="resp_<run id>: the run in GET /api/runs/{id}/.")
    object = serializers.ChoiceField(["response"])
    created_at = serializers.IntegerField(help_text="When the run was queued, Unix seconds.")
    status = serializers.ChoiceField(["queued", "in_progress", "completed", "incomplete", "failed", "cancelled"])
    background = serializers.BooleanField(help_text="As sent.")
    error = serializers.JSONField(allow_null=True, help_text="{code, message} when failed.")
    incomplete_details = serializers.JSONField(allow_null=True, help_text="{reason: max_output_tokens} when the "
                                                                          "reply stopped at the length limit.")
    instructions = serializers.CharField(allow_null=True, help_text="As sent.")
    max_output_tokens = serializers.IntegerField(help_text="The limit the run had.")
    model = serializers.CharField(help_text="The model (pool) that answered.")
    output = serializers.JSONField(help_text="[] while queued (and when failed); else the message item "
                                             "{type: message, id: msg_<run id>, role: assistant, status, "
                                             "content: [{type: output_text, text, annotations: []}]} (with tools, "
                                             "when there are words) and function_call items {type: function_call, "
                                             "id: fc_<run id>_<n>, call_id, name, arguments, status}; in_progress "
                                             "with what is read so far while running.")
    previous_response_id = serializers.CharField(allow_null=True, help_text="As sent.")
    temperature = serializers.FloatField(help_text="The run's.")
    top_p = serializers.FloatField(help_text="The run's.")
    usage = serializers.JSONField(allow_null=True, help_text="{input_tokens, output_tokens, total_tokens, ...} "
                                                             "once finished.")
    metadata = serializers.JSONField(help_text="As sent.")


class ResponseDeleted(serializers.Serializer):
    id = serializers.CharField(help_text="The response deleted.")
    object = serializers.ChoiceField(["response.deleted"])
    deleted = serializers.BooleanField(help_text="Always true.")


ERROR_TEXT = {400: "Invalid request (`param` names the field).", 401: "Missing, invalid or revoked API key.",
              404: "No such response (or model) for you.", 405: "Method not allowed.", 409: "A reply is still being "
              "generated in that conversation.", 413: "Body too large.", 415: "The body is not JSON.",
              429: "The tenant's limits; see Retry-After.", 503: "Overloaded, or briefly unavailable; see "
                                                                 "Retry-After."}


def _errors(*statuses, rules: str = "") -> dict:
    """`rules`: what a well-formed request may still be refused for (chatsite.api.openapi.errors)."""
    text = {s: ERROR_TEXT[s] for s in statuses}
    if rules:
        text[400] += " Also, however well formed the request: " + rules
    return {s: OpenApiResponse(OpenAIErrorResponse, description=text[s]) for s in statuses}


STREAM_DESCRIPTION = """`text/event-stream`: `event: <type>` and `data: <json>` with `sequence_number` from 0:
response.created, response.in_progress, response.output_item.added, response.content_part.added (0-3), one
response.output_text.delta per token entry of the run's stream, then response.output_text.done,
response.content_part.done, response.output_item.done and response.completed (response.incomplete when cut at
max_output_tokens or cancelled); response.failed alone when the run failed. Comment lines (`: keep-alive`) may come
while the model is quiet."""

EVENT_SCHEMA = {"type": "object", "required": ["event", "data"], "properties": {
    "event": {"type": "string", "description": "The event's type, e.g. response.output_text.delta."},
    "data": {"type": "string", "description": "The event as JSON, with type and sequence_number."}}}
RESPONSE_ID = OpenApiParameter("response_id", str, OpenApiParameter.PATH, description="resp_<run id>.")


class ResponsesDocs(APIView):
    authentication_classes = [ApiKeyAuthentication]
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="openai_responses_create", tags=TAGS, summary="Create a response (OpenAI Responses API)",
        description="A run (source `openai`) in a new chat holding the input, or a new turn of the chat of "
                    "`previous_response_id`. Durable: with `background` or a dropped stream the run goes on and "
                    "is saved; GET /v1/responses/{id} retrieves or resumes it.\n\n" + STREAM_DESCRIPTION,
        request=ResponseCreateRequest,
        examples=[OpenApiExample("Hello", request_only=True, value={"model": "flagship", "input": "What is a loop?",
                                                                    "instructions": "Be brief."})],
        responses={(200, "application/json"): ResponseObject,
                   (200, "text/event-stream"): OpenApiResponse(EVENT_SCHEMA, description=STREAM_DESCRIPTION),
                   **_errors(400, 401, 404, 405, 409, 413, 415, 429, 503)})
    def post(self, request):  # pragma: no cover - never routed
        raise NotImplementedError("served by chatsite.openai_api.responses.views.responses")


class ResponseDetailDocs(APIView):
    authentication_classes = [ApiKeyAuthentication]

    @extend_schema(
        operation_id="openai_responses_retrieve", tags=TAGS, summary="Retrieve or resume a response (OpenAI)",
        description="The response object; with `stream=true` its events (the same bytes as the stream that "
                    "created it), after `starting_after` if given.\n\n" + STREAM_DESCRIPTION,
        parameters=[RESPONSE_ID,
                    OpenApiParameter("stream", bool, description="Send the events instead of the object."),
                    OpenApiParameter("starting_after", {"type": "integer", "minimum": 0, "maximum": MAX_SEQUENCE},
                                     description="With stream=true: the last sequence_"
                                                                        "number you had; events after it. A "
                                                                        "number of a stream lost since (a restart "
                                                                        "of its store) gets one `error` event, "
                                                                        "code `stream_restarted`: stream again "
                                                                        "without it.")],
        responses={(200, "application/json"): ResponseObject,
                   (200, "text/event-stream"): OpenApiResponse(EVENT_SCHEMA, description=STREAM_DESCRIPTION),
                   **_errors(400, 401, 404, 405, 503, rules="`starting_after` without `stream=true`.")})
    def get(self, request, response_id: str):  # pragma: no cover - never routed
        raise NotImplementedError

    @extend_schema(operation_id="openai_responses_delete", tags=TAGS, summary="Delete a response (OpenAI)",
                   description="Deletes the response's conversation (its chat, with every response in it); "
                               "404 afterwards. Refused (409) while a reply is being generated in it.",
                   parameters=[RESPONSE_ID], responses={200: ResponseDeleted, **_errors(401, 404, 405, 409, 503)})
    def delete(self, request, response_id: str):  # pragma: no cover - never routed
        raise NotImplementedError


class ResponseCancelDocs(APIView):
    authentication_classes = [ApiKeyAuthentication]

    @extend_schema(operation_id="openai_responses_cancel", tags=TAGS, summary="Cancel a response (OpenAI)",
                   description="Stops the run, keeping its partial reply; waits up to 5 s for it to stop. "
                               "Cancelling a finished background response changes nothing; a finished one that "
                               "was not in the background is a 400.",
                   parameters=[RESPONSE_ID], request=None, responses={200: ResponseObject,
                                                                      **_errors(400, 401, 404, 405, 503)})
    def post(self, request, response_id: str):  # pragma: no cover - never routed
        raise NotImplementedError


class InputItemList(serializers.Serializer):
    object = serializers.CharField(help_text="Always list.")
    data = serializers.JSONField(help_text="Items: message (id msg_in<n>), function_call (fc_in<n>_<k>) and "
                                           "function_call_output (fco_<n>).")
    first_id = serializers.CharField(allow_null=True, help_text="The page's first item's id (null when empty).")
    last_id = serializers.CharField(allow_null=True, help_text="Its last item's id: the next page's `after`.")
    has_more = serializers.BooleanField(help_text="Whether items come after this page.")


class ResponseInputItemsDocs(APIView):
    authentication_classes = [ApiKeyAuthentication]

    @extend_schema(operation_id="openai_responses_input_items", tags=TAGS, summary="List a response's input items",
                   description="The items this response's input held (not those of the responses it continued).",
                   parameters=[RESPONSE_ID,
                               OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": 100},
                                                description="1 to 100; 20 by default."),
                               OpenApiParameter("order", str, enum=["asc", "desc"], description="desc by default."),
                               OpenApiParameter("after", str, description="An item id: the items after it.")],
                   responses={200: InputItemList, **_errors(400, 401, 404, 405, 503, rules=(
                       "`after` that is not one of this response's items."))})
    def get(self, request, response_id: str):  # pragma: no cover - never routed
        raise NotImplementedError
