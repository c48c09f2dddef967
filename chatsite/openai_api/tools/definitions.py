"""Tool calling on /v1/chat/completions, the request side: `tools`, `tool_choice` and
`parallel_tool_calls` checked and reduced to what a run keeps (its sampling's
"tools"); an assistant message's `tool_calls` and a tool message checked; and the
JSON Schema that constrains a reply that must call a function.

A reply that must call (`required`, or a named function) is constrained by vLLM
structured outputs: a named function's reply is its arguments object, a required
call's a list of {"name", "arguments"} (one at most without parallel calls). With
`auto` the model writes Hermes `<tool_call>` blocks, parsed by tool_calls.py; with
`auto` and a response_format, the reply is JSON: that format's content, or a list of
calls.

A function's parameters may refer to definitions of their own (`$ref` to `#/$defs/...`,
as Pydantic's nested models and `openai.pydantic_function_tool` write them). In a
required call's schema each such function's parameters become a definition of that
schema, `#/$defs/<function name>`, with their references rebased onto it: vLLM's server
hoists the `$defs` alone, and refuses two functions with a definition of one name."""
import copy
import json
import re
from dataclasses import dataclass

from chatsite.errors import InvalidInput
from chatsite.runs.schema_limits import MAX_SCHEMA_DEPTH, check_json, subschemas
from chatsite.runs.validation import check_json_schema

MAX_TOOLS = 128
MAX_TOOLS_CHARS = 64_000  # all definitions as JSON
NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MAX_CALL_ID_CHARS = 100
NO_PARAMETERS = {"type": "object", "properties": {}}
CHOICES = ("none", "auto", "required")


@dataclass(frozen=True)
class ToolUse:
    """The functions a run offers and how it must use them."""
    definitions: list[dict]  # [{"type": "function", "function": {"name", "description"?, "parameters"}}]
    choice: str | dict  # "auto", "required" or {"name": ...}
    parallel: bool

    def as_run_tools(self, *, content_format: dict | None = None) -> dict:
        """What GenerationRun.sampling["tools"] holds: the worker renders `definitions`,
        the formatter reads `choice` and `parallel`, and `json` when an `auto` reply is
        JSON (a response_format's content, or calls: see constraint)."""
        out = {"definitions": self.definitions, "choice": self.choice, "parallel": self.parallel}
        if content_format is not None and self.choice == "auto":
            out["json"] = True
        return out

    def constraint(self, content_format: dict | None = None) -> dict | None:
        """The response_format that makes the reply a call (None for `auto`). With
        `content_format` (the run's own response_format, cleaned) and `auto`, the reply is
        JSON: content of that format, or a list of calls; with `required` or a named
        function the reply is a call, so the format has no content to shape."""
        if self.choice == "auto":
            return None if content_format is None else _content_or_calls(content_format, self._calls_schema())
        if isinstance(self.choice, dict):
            schema = self._by_name()[self.choice["name"]]["parameters"]
            return {"type": "json_schema", "name": "tool_arguments", "schema": schema}
        return {"type": "json_schema", "name": "tool_calls", "schema": self._calls_schema()}

    def _by_name(self) -> dict:
        return {d["function"]["name"]: d["function"] for d in self.definitions}

    def _calls_schema(self) -> dict:
        defs, calls = {}, []
        for name, f in self._by_name().items():
            arguments = f["parameters"]
            if _refers(arguments):
                defs[name], arguments = _rebased(arguments, f"#/$defs/{name}"), {"$ref": f"#/$defs/{name}"}
            calls.append({"type": "object", "properties": {"name": {"const": name}, "arguments": arguments},
                          "required": ["name", "arguments"], "additionalProperties": False})
        schema = {"type": "array", "minItems": 1, "items": {"anyOf": calls}}
        if not self.parallel:
            schema["maxItems"] = 1
        if defs:
            schema["$defs"] = defs
        return schema


def _content_or_calls(content_format: dict, calls: dict) -> dict:
    """One schema for a reply that is either content of `content_format` or calls: the
    content schema's definitions and the calls' moved to the root, where their references
    point (a content definition named as a function gives way to the function's)."""
    content = content_format.get("schema", {"type": "object"}) if content_format["type"] == "json_schema" else {
        "type": "object"}
    definitions = {key: content[key] for key in ("$defs", "definitions") if key in content}
    content = {k: v for k, v in content.items() if k not in definitions}
    if "$defs" in calls:
        calls = dict(calls)
        definitions["$defs"] = {**definitions.get("$defs", {}), **calls.pop("$defs")}
    return {"type": "json_schema", "name": "content_or_tool_calls",
            "schema": {"anyOf": [content, calls], **definitions}}


def _refers(schema: dict) -> bool:
    return any(isinstance(node.get("$ref"), str) for node, _ in subschemas(schema))


def _rebased(schema: dict, base: str) -> dict:
    """A copy of `schema` whose references within itself ("#...") point into `base`."""
    out = copy.deepcopy(schema)  # depth-limited at admission (schema_limits)
    for node, _ in subschemas(out):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            node["$ref"] = base + ref[1:]
    return out


def parse_tool_use(body: dict) -> ToolUse | None:
    """The request's tool use, or None when it offers no tools (none given, or
    tool_choice "none"). Raises InvalidInput naming the parameter at fault."""
    tools, choice, parallel = body.get("tools"), body.get("tool_choice"), body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise InvalidInput("parallel_tool_calls must be true or false", field="parallel_tool_calls")
    definitions = _definitions(tools) if tools is not None else []
    names = {d["function"]["name"] for d in definitions}
    choice = _choice(choice, names)
    if choice == "none" or (choice == "auto" and not definitions):
        return None
    return ToolUse(definitions, choice, True if parallel is None else parallel)


def _definitions(tools) -> list[dict]:
    if not isinstance(tools, list) or len(tools) > MAX_TOOLS:
        raise InvalidInput(f"tools must be a list of at most {MAX_TOOLS} function tools", field="tools")
    # tools[i].function.parameters is 3 levels down: its own depth is checked with its cost below.
    check_json(tools, field="tools", max_depth=MAX_SCHEMA_DEPTH + 3)
    if len(json.dumps(tools)) > MAX_TOOLS_CHARS:
        raise InvalidInput(f"tools may be at most {MAX_TOOLS_CHARS} characters as JSON", field="tools")
    out, seen = [], set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise InvalidInput(f'tools[{i}] must be {{"type": "function", "function": {{...}}}}: only function '
                               "tools are supported", field=f"tools[{i}].type")
        function = tool.get("function")
        if not isinstance(function, dict):
            raise InvalidInput(f"tools[{i}].function must be an object with name, description and parameters",
                               field=f"tools[{i}].function")
        name = function.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise InvalidInput(f"tools[{i}].function.name must be 1 to 64 letters, digits, _ or -",
                               field=f"tools[{i}].function.name")
        if name in seen:
            raise InvalidInput(f"tools[{i}].function.name: {name!r} is given twice", field=f"tools[{i}].function.name")
        seen.add(name)
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise InvalidInput(f"tools[{i}].function.description must be a string",
                               field=f"tools[{i}].function.description")
        if function.get("strict") not in (None, True, False):
            raise InvalidInput(f"tools[{i}].function.strict must be true or false", field=f"tools[{i}].function.strict")
        clean = {"name": name, "parameters": _parameters(function.get("parameters"), i)}
        if description:
            clean["description"] = description
        out.append({"type": "function", "function": clean})
    return out


def _parameters(schema, i: int) -> dict:
    field = f"tools[{i}].function.parameters"
    if schema is None:
        return dict(NO_PARAMETERS)
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise InvalidInput(f'{field} must be a JSON Schema of an object ({{"type": "object", "properties": '
                           "{...}})", field=field)
    check_json_schema(schema, field=field, max_chars=MAX_TOOLS_CHARS)
    return schema


def _choice(choice, names: set[str]):
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        if choice not in CHOICES:
            raise InvalidInput('tool_choice must be "none", "auto", "required" or {"type": "function", '
                               '"function": {"name": ...}}', field="tool_choice")
        if choice == "required" and not names:
            raise InvalidInput('tool_choice "required" needs tools to call', field="tool_choice")
        return choice
    function = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise InvalidInput('tool_choice must be "none", "auto", "required" or {"type": "function", "function": '
                           '{"name": ...}}', field="tool_choice")
    if name not in names:
        raise InvalidInput(f"tool_choice names the function {name[:64]!r}, which is not among tools",
                           field="tool_choice.function.name")
    return {"name": name}


def assistant_calls(calls, i: int) -> list[dict]:
    """An assistant message's `tool_calls`, checked: [{id, type, function: {name, arguments}}],
    arguments a JSON object as text. Raises InvalidInput naming the part."""
    if not isinstance(calls, list) or not calls:
        raise InvalidInput(f"messages[{i}].tool_calls must be a non-empty list", field=f"messages[{i}].tool_calls")
    check_json(calls, field=f"messages[{i}].tool_calls")  # saved as the message's jsonb
    out = []
    for j, call in enumerate(calls):
        at = f"messages[{i}].tool_calls[{j}]"
        if not isinstance(call, dict) or call.get("type", "function") != "function":
            raise InvalidInput(f"{at} must be a function call object", field=at)
        call_id, function = call.get("id"), call.get("function")
        if not isinstance(call_id, str) or not 0 < len(call_id) <= MAX_CALL_ID_CHARS:
            raise InvalidInput(f"{at}.id must be a string of 1 to {MAX_CALL_ID_CHARS} characters", field=f"{at}.id")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidInput(f"{at}.function must be an object with name and arguments", field=f"{at}.function")
        arguments = function.get("arguments")
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else None
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise InvalidInput(f"{at}.function.arguments must be a JSON object as a string",
                               field=f"{at}.function.arguments")
        out.append({"id": call_id, "type": "function",
                    "function": {"name": function["name"], "arguments": arguments}})
    return out


def tool_call_id(msg: dict, i: int, call_ids: set[str]) -> str:
    """A tool message's `tool_call_id`: one of the earlier assistant messages' calls."""
    value = msg.get("tool_call_id")
    if not isinstance(value, str) or value not in call_ids:
        raise InvalidInput(f"messages[{i}].tool_call_id must be the id of a call in an earlier assistant "
                           "message's tool_calls", field=f"messages[{i}].tool_call_id")
    return value
