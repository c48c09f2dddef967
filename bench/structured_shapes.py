"""The two constrained replies of issue 43 §3, as bench.structured_takeover and the
tests (tests/faults, tests/e2e) ask for them and judge them: a JSON Schema reply
(`response_format`) and one `tool_choice: required` call. No Django, no engine.

`Shapes` names the schemas and prompts; CITY is the real engine's (every part bounded:
the 135M model, left to it, writes an integer's digits to max_tokens); the fake engine's
tests pass their own, longer, schema. A reply is judged as it is saved (the model's text:
the content, or the calls' JSON list) against what the client streamed."""
import json
from dataclasses import dataclass

import jsonschema

SHAPES = ("json_schema", "tool_required")

REPORT = {"type": "object", "additionalProperties": False, "required": ["city", "country", "capital", "landmarks"],
          "properties": {"city": {"type": "string", "maxLength": 20},
                         "country": {"type": "string", "enum": ["France", "Italy", "Spain"]},
                         "capital": {"type": "boolean"},
                         "landmarks": {"type": "array", "items": {"type": "string", "maxLength": 24},
                                       "minItems": 2, "maxItems": 3}}}
WEATHER = {"type": "object", "additionalProperties": False, "required": ["city", "unit", "days"],
           "properties": {"city": {"type": "string", "maxLength": 30},
                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                          "days": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}}}


@dataclass(frozen=True)
class Shapes:
    report: dict  # the JSON Schema reply's schema
    tool: str  # the one function the call must name
    parameters: dict  # its arguments' schema
    report_prompt: str
    tool_prompt: str

    def body(self, shape: str) -> dict:
        """The request fields of `shape` (add model, max_tokens, stream, ...)."""
        if shape == "json_schema":
            fmt = {"type": "json_schema", "json_schema": {"name": "report", "schema": self.report}}
            return {"response_format": fmt, "messages": [{"role": "user", "content": self.report_prompt}]}
        return {"tools": [{"type": "function", "function": {"name": self.tool, "parameters": self.parameters}}],
                "tool_choice": "required", "parallel_tool_calls": False,
                "messages": [{"role": "user", "content": self.tool_prompt}]}

    def problem(self, shape: str, saved: str) -> str | None:
        """None if `saved` (the reply as the run saved it) is a whole reply of its shape, else what is wrong."""
        try:
            value = json.loads(saved)
            if shape == "json_schema":
                jsonschema.validate(value, self.report)
                return None
            if not isinstance(value, list) or len(value) != 1:
                return f"not one call: {saved[:120]}"
            for call in value:
                if call["name"] != self.tool:
                    return f"a call of {call['name']!r}"
                jsonschema.validate(call["arguments"], self.parameters)
        except (ValueError, KeyError, TypeError, jsonschema.ValidationError) as exc:
            return f"{type(exc).__name__}: {str(exc)[:120]}"
        return None


CITY = Shapes(REPORT, "get_weather", WEATHER, "Describe Paris in JSON.", "What is the weather in Paris this week?")


def client_text(shape: str, chunks: list[dict]) -> str:
    """What the client read from /v1/chat/completions' chunks: the content, or the calls
    as a JSON list of {name, arguments}."""
    deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
    if shape == "json_schema":
        return "".join(d.get("content") or "" for d in deltas)
    calls: dict[int, dict] = {}
    for d in deltas:
        for part in d.get("tool_calls") or ():
            call = calls.setdefault(part["index"], {"name": "", "arguments": ""})
            call["name"] += part.get("function", {}).get("name") or ""
            call["arguments"] += part.get("function", {}).get("arguments") or ""
    try:
        return json.dumps([{"name": c["name"], "arguments": json.loads(c["arguments"])}
                           for _, c in sorted(calls.items())])
    except ValueError:
        return "<calls that do not parse>"


def same(shape: str, saved: str, client: str) -> bool:
    """Whether the client read the saved reply: the content byte for byte, or the same calls
    (a call's arguments reach the client re-encoded: its spacing is not the model's)."""
    if shape == "json_schema":
        return saved == client
    try:
        return json.loads(client) == [{"name": c["name"], "arguments": c["arguments"]} for c in json.loads(saved)]
    except (ValueError, KeyError, TypeError):
        return False
