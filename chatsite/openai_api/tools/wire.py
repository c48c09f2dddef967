"""A tool run's chat completion in OpenAI's wire format: `message.tool_calls` and
`finish_reason: "tool_calls"` whole; streamed, `delta.tool_calls` chunks with their
`index` (a call's id, type and name in its first chunk, its arguments after), and
content deltas free of the call markup. The reply is read by tool_calls.ReplyReader."""
from chatsite.openai_api.completions import wire
from chatsite.openai_api.tools.reader import ArgumentsDelta, Call, Content, ReplyReader, read_whole
from chatsite.runs.models import GenerationRun


def shape_for(run: GenerationRun, shape: wire.ChatShape) -> wire.ChatShape:
    """`shape`, or for a chat run with tools a shape of its own (it keeps the stream's reading
    state; such a call has one choice: n > 1 with tools is refused)."""
    tools = (run.sampling or {}).get("tools")
    return ToolChatShape(run, tools) if tools and shape is wire.CHAT else shape


def call_id_prefix(run: GenerationRun) -> str:
    """Call ids are the run's and the call's number: the same each time the reply is read."""
    return call_id_prefix_of(run.pk)


def call_id_prefix_of(run_id: int) -> str:
    return f"call_{run_id}_"


def _finish(reason: str, num_calls: int) -> str:
    return "tool_calls" if num_calls and reason == "stop" else wire.finish_reason(reason)


def _tool_call(call: Call) -> dict:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


class ToolChatShape(wire.ChatShape):
    def __init__(self, run: GenerationRun, tools: dict):
        self._tools = tools
        self._reader = ReplyReader(tools, call_id_prefix=call_id_prefix(run))

    def whole(self, runs: list[GenerationRun]) -> dict:
        run = runs[0]
        body = wire.completion(runs)
        content, calls = read_whole(run.assistant_message.content, self._tools, call_id_prefix=call_id_prefix(run))
        choice = body["choices"][0]
        # A reply that must call has no content, even cut off before its first call's name.
        choice["message"]["content"] = content if self._tools["choice"] == "auto" else None
        if calls:
            choice["message"]["tool_calls"] = [_tool_call(c) for c in calls]
        choice["finish_reason"] = _finish(run.finish_reason, len(calls))
        return body

    def opening(self, run: GenerationRun, include_usage: bool, index: int = 0) -> list[dict]:
        # A reply that must call has no content; with `auto` it may.
        content = "" if self._tools["choice"] == "auto" else None
        return [wire.chunk(run, delta={"role": "assistant", "content": content}, include_usage=include_usage)]

    def pieces(self, run: GenerationRun, text: str, include_usage: bool, index: int = 0, *, logprobs=None,
               offset: int = 0) -> list[dict]:
        # A tool run's chunks are re-cut by the reader: its logprobs are in the whole answer only.
        return [wire.chunk(run, delta=_delta(e), include_usage=include_usage) for e in self._reader.feed(text)]

    def finishing(self, run: GenerationRun, reason: str, include_usage: bool, index: int = 0) -> list[dict]:
        out = [wire.chunk(run, delta=_delta(e), include_usage=include_usage) for e in self._reader.finish()]
        finish = _finish(reason, self._reader.num_calls)
        return out + [wire.chunk(run, delta={}, finish=finish, include_usage=include_usage)]


def _delta(event) -> dict:
    if isinstance(event, Content):
        return {"content": event.text}
    if isinstance(event, ArgumentsDelta):
        return {"tool_calls": [{"index": event.index, "function": {"arguments": event.text}}]}
    return {"tool_calls": [{"index": event.index, **_tool_call(event)}]}
