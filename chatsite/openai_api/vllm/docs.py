"""OpenAPI documentation of the request fields /v1 takes beyond OpenAI's: vLLM's own
(chatsite.openai_api.vllm.params serves them) and logit_bias, shared by the chat and
text completion requests of chatsite.openai_api.completions.docs (the fuzzer reads them there)."""
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chatsite.runs.validation import MAX_LOGIT_BIAS

STRUCTURED = {"type": "object", "description": "Exactly one of json (a JSON Schema, or its text), regex, choice "
              "(a list of strings), grammar (EBNF), structural_tag, json_object (true).",
              "properties": {"json": {}, "regex": {"type": "string"}, "choice": {"type": "array", "items": {
                  "type": "string"}}, "grammar": {"type": "string"}, "structural_tag": {},
                  "json_object": {"type": "boolean"}}}


@extend_schema_field({"type": "object", "additionalProperties": {"type": "number", "minimum": -100, "maximum": 100},
                      "maxProperties": MAX_LOGIT_BIAS})
class LogitBiasField(serializers.JSONField):
    pass


@extend_schema_field(STRUCTURED)
class StructuredOutputsField(serializers.JSONField):
    pass


class VllmRequestFields(serializers.Serializer):
    logit_bias = LogitBiasField(required=False, allow_null=True, help_text=(
        "Token ids (as strings) to a bias from -100 (never) to 100 (only), added to the model's logits. Ids must "
        "be in the model's vocabulary."))
    structured_outputs = StructuredOutputsField(required=False, allow_null=True, help_text=(
        "vLLM's constraint on the reply (not with response_format). A regex or grammar vLLM cannot compile is a "
        "400 (a stream: an error event)."))
    min_tokens = serializers.IntegerField(required=False, allow_null=True, min_value=0, help_text=(
        "vLLM's: at least this many tokens before the reply may stop (at most max_tokens)."))
    allowed_token_ids = serializers.ListField(child=serializers.IntegerField(min_value=0), required=False,
                                              allow_null=True, help_text="vLLM's: only these tokens.")
    prompt_logprobs = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=20, help_text=(
        "vLLM's: the prompt's log probabilities (`prompt_logprobs`: null, then {token id: {logprob, rank, "
        "decoded_token}} per token), with this many alternatives."))
    return_token_ids = serializers.BooleanField(required=False, allow_null=True, help_text=(
        "vLLM's: the reply's `token_ids` and the prompt's `prompt_token_ids`."))
    return_tokens_as_token_ids = serializers.BooleanField(required=False, allow_null=True, help_text=(
        "vLLM's: log probabilities name tokens `token_id:N`."))
