"""Function tools on the Responses API, the request side: `tools` (flat function
definitions), `tool_choice` and `parallel_tool_calls` reduced to the one ToolUse chat
completions use (tools.py checks them: the same rules, said of the Responses fields);
and the input items that carry calls, `function_call` and `function_call_output`, as
the chat's assistant tool calls and tool results."""
import json

from chatsite.errors import InvalidInput
from chatsite.openai_api.tools import definitions as tool_params
from chatsite.openai_api.tools.definitions import ToolUse

TOOL_FIELDS = ("name", "description", "parameters", "strict")


def parse_tools(body: dict) -> tuple[ToolUse | None, dict]:
    """(the request's tool use, or None; what the response object echoes: tools,
    tool_choice, parallel_tool_calls). Raises InvalidInput naming the Responses field."""
    tools, choice = body.get("tools"), body.get("tool_choice")
    if tools is not None and not isinstance(tools, list):
        raise InvalidInput("tools must be a list of function tools", field="tools")
    chat_tools = [_chat_tool(tool, i) for i, tool in enumerate(tools or [])]
    try:
        tool_use = tool_params.parse_tool_use({"tools": chat_tools if tools is not None else None,
                                               "tool_choice": _chat_choice(choice),
                                               "parallel_tool_calls": body.get("parallel_tool_calls")})
    except InvalidInput as exc:  # said of the Responses fields: tools[i].name, tool_choice.name
        field = (exc.field or "").replace(".function.", ".").replace(".function", "")
        raise InvalidInput(exc.message.replace(".function.", ".").replace(".function", ""), field=field) from None
    echo = {"tools": [{"type": "function", "name": t["function"]["name"],
                       "description": t["function"].get("description"),
                       "parameters": t["function"]["parameters"], "strict": t["function"].get("strict", True)}
                      for t in chat_tools],
            "tool_choice": choice if choice is not None else "auto",
            "parallel_tool_calls": body.get("parallel_tool_calls", True) is not False}
    return tool_use, echo


def _chat_tool(tool, i: int) -> dict:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        kind = tool.get("type") if isinstance(tool, dict) else None
        raise InvalidInput(f"tools[{i}].type: only function tools are supported here, not {str(kind)[:40]!r}",
                           field=f"tools[{i}].type")
    return {"type": "function", "function": {k: tool[k] for k in TOOL_FIELDS if k in tool}}


def _chat_choice(choice):
    if isinstance(choice, dict):
        if choice.get("type") != "function":
            raise InvalidInput('tool_choice must be "none", "auto", "required" or {"type": "function", "name": ...}',
                               field="tool_choice")
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice


def call_item(item: dict, where: str) -> dict:
    """A `function_call` input item (a call the model made, passed back) as a chat tool call."""
    call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
    if not isinstance(call_id, str) or not 0 < len(call_id) <= tool_params.MAX_CALL_ID_CHARS:
        raise InvalidInput(f"{where}.call_id must be a string of 1 to {tool_params.MAX_CALL_ID_CHARS} characters",
                           field=f"{where}.call_id")
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"{where}.name must be the function's name", field=f"{where}.name")
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise InvalidInput(f"{where}.arguments must be a JSON object as a string", field=f"{where}.arguments")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def output_item(item: dict, where: str) -> dict:
    """A `function_call_output` input item as the chat's tool message answering its call."""
    call_id, output = item.get("call_id"), item.get("output")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidInput(f"{where}.call_id must be the call_id of the function call it answers",
                           field=f"{where}.call_id")
    if isinstance(output, list):  # input_text parts
        if not all(isinstance(p, dict) and p.get("type") == "input_text" and isinstance(p.get("text"), str)
                   for p in output):
            raise InvalidInput(f"{where}.output: only a string or input_text parts are supported",
                               field=f"{where}.output")
        output = "".join(p["text"] for p in output)
    if not isinstance(output, str):
        raise InvalidInput(f"{where}.output must be a string: the function's result", field=f"{where}.output")
    return {"role": "tool", "content": output, "tool_call_id": call_id}
