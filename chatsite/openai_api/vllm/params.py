"""vLLM's own request fields on /v1/chat/completions and /v1/completions: a client
migrating from `vllm serve` sends them, so each is honoured or refused by name, never
dropped in silence (docs/api.md lists every one with its status).

Honoured ones become the run's sampling (checked by chatsite.runs.validation, the one
place sampling is validated, as vLLM's server checks them); the rest are refused with a
400 naming the field unless they ask for vLLM's default."""
import json

from chatsite.errors import InvalidInput
from chatsite.runs.validation import clean_response_format

# vLLM's fields that would change the reply and are not served here: refused unless they
# ask for vLLM's default (the values listed), which clients built for vLLM often send.
REFUSED = {
    "use_beam_search": (None, False), "length_penalty": (None, 1, 1.0), "stop_token_ids": (None, []),
    "include_stop_str_in_output": (None, False), "skip_special_tokens": (None, True),
    "spaces_between_special_tokens": (None, True), "truncate_prompt_tokens": (None,), "truncation_side": (None,),
    "logprob_token_ids": (None,), "bad_words": (None, []), "documents": (None,), "chat_template": (None,),
    "chat_template_kwargs": (None, {}), "media_io_kwargs": (None, {}), "mm_processor_kwargs": (None, {}),
    "priority": (None, 0), "cache_salt": (None,), "kv_transfer_params": (None,), "ec_transfer_params": (None,),
    "vllm_xargs": (None, {}), "repetition_detection": (None,), "watermarking": (None, False),
    "return_prompt_text": (None, False), "return_token_offsets": (None, False), "prompt_embeds": (None,),
    "reasoning_effort": (None,), "thinking_token_budget": (None,), "include_reasoning": (None, True),
    "routed_experts_prompt_start": (None, 0), "mm_payload": (None, "tensors"),
}
# The chat template's own switch, which only a chat request has (a text completion's
# prompt gets the tokenizer's special tokens, as vLLM adds them by default).
REFUSED_CHAT = {"add_special_tokens": (None, False)}
REFUSED_TEXT = {"add_special_tokens": (None, True)}
# vLLM's structured-output fields before `structured_outputs` replaced them.
LEGACY_GUIDED = ("guided_json", "guided_regex", "guided_choice", "guided_grammar", "guided_decoding_backend",
                 "guided_whitespace_pattern", "guided_json_object")
STRUCTURED_KINDS = ("json", "regex", "choice", "grammar", "structural_tag", "json_object")
STRUCTURED_OPTIONS = {"disable_any_whitespace": (None, False), "disable_additional_properties": (None, False),
                      "whitespace_pattern": (None,)}
# Honoured: passed to the run's sampling as they are (clean_sampling checks them).
KNOBS = ("min_tokens", "allowed_token_ids", "prompt_logprobs", "return_token_ids", "return_tokens_as_token_ids")
# Accepted and not used: they change nothing in the reply (ids and routing hints; the
# stream is paced by the platform's own coalescing).
IGNORED = ("request_id", "session_id", "stream_interval", "return_mm_kwargs")


_CHECKED = frozenset({*LEGACY_GUIDED, *REFUSED, *REFUSED_CHAT, *REFUSED_TEXT})


def refuse_unsupported(body: dict, *, chat: bool) -> None:
    """A 400 naming the first of vLLM's fields sent with a value this server does not serve."""
    if _CHECKED.isdisjoint(body):  # most calls send none of them: one set test, not ~40 lookups a call
        return
    for name in LEGACY_GUIDED:
        if body.get(name) is not None:
            raise InvalidInput(f"{name} is vLLM's older field; send structured_outputs (or response_format)",
                               field=name)
    for name, allowed in {**REFUSED, **(REFUSED_CHAT if chat else REFUSED_TEXT)}.items():
        if body.get(name) not in allowed:
            raise InvalidInput(f"{name} (a vLLM parameter) is not supported by this server; leave it out",
                               field=name)


def vllm_sampling(body: dict) -> dict:
    """The vLLM knobs a run keeps (clean_sampling's keyword arguments), {} when none is
    sent, so a request without them digests as it always did."""
    out = {name: body[name] for name in KNOBS if body.get(name) is not None}
    out.update(_structured(body))
    return out


def _structured(body: dict) -> dict:
    """`structured_outputs` as the run's constraint: JSON as a response_format (the same
    checks), the others as its `guide`. One kind only, and not with response_format."""
    value = body.get("structured_outputs")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput("structured_outputs must be an object with one of " + ", ".join(STRUCTURED_KINDS),
                           field="structured_outputs")
    for name, allowed in STRUCTURED_OPTIONS.items():
        if value.get(name) not in allowed:
            raise InvalidInput(f"structured_outputs.{name} is not supported by this server; leave it out",
                               field=f"structured_outputs.{name}")
    kinds = [k for k in STRUCTURED_KINDS if value.get(k) not in (None, False)]
    unknown = sorted(set(value) - set(STRUCTURED_KINDS) - set(STRUCTURED_OPTIONS))
    if unknown:
        raise InvalidInput(f"structured_outputs.{unknown[0][:40]} is not a structured-output field",
                           field=f"structured_outputs.{unknown[0][:40]}")
    if len(kinds) != 1:
        raise InvalidInput("structured_outputs must have exactly one of " + ", ".join(STRUCTURED_KINDS),
                           field="structured_outputs")
    if body.get("response_format") not in (None, {"type": "text"}):
        raise InvalidInput("send structured_outputs or response_format, not both", field="structured_outputs")
    kind = kinds[0]
    if kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    if kind == "json":
        schema = value["json"]
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError:
                raise InvalidInput("structured_outputs.json must be a JSON Schema (an object, or its JSON text)",
                                   field="structured_outputs.json") from None
        fmt = {"type": "json_schema", "json_schema": {"name": "structured_outputs", "schema": schema}}
        try:
            clean_response_format(fmt)
        except InvalidInput as exc:  # said of the field the client sent
            raise InvalidInput(exc.message.replace("response_format.json_schema.schema", "structured_outputs.json"),
                               field="structured_outputs.json") from None
        return {"response_format": fmt}
    return {"guide": [kind, value[kind]]}
