"""Reading a tool run's reply as content and function calls, the same way whether
it is read whole (a non-streamed answer, a saved reply) or piece by piece as the run
stream delivers it: the stream holds the model's text as it wrote it, and this is
the one reader of it, so resuming or replaying a stream gives the same calls.

- a named tool_choice: the whole reply is the arguments object of that function
  (constrained by its schema), streamed as the call's arguments as they come;
- `required`: the reply is a JSON list of {"name", "arguments"} (constrained), read
  when it is complete;
- `auto` with a response_format (`json` in the run's tools): the reply is JSON, read
  when it is complete: a list of calls of offered functions, or else content;
- `auto`: the model writes Hermes blocks, `<tool_call>{"name", "arguments"}</tool_call>`
  (or a list of such objects in one block); text outside them is content. Text that
  could be the start of a block is held back until it is known not to be, so the
  markup never reaches the content. A block that is not a call of an offered function
  is passed on as content, as written.

A reply cut off (max_tokens) inside a call, as OpenAI answers one: the call whose
function's name was written comes with the arguments written so far (JSON text that
does not parse), a call cut off before its name is left out, and the call markup is
never content.
"""
import json
import re
from dataclasses import dataclass

OPEN, CLOSE = "<tool_call>", "</tool_call>"
# The start of a call object whose name is written ({"name", "arguments"}: the order the
# constraint's schema and the tool template give), up to where its arguments begin.
CALL_START = re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"(?:arguments|parameters)"\s*:\s*')
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class Content:
    text: str


@dataclass(frozen=True, slots=True)
class Call:
    """A call, or the start of one whose arguments follow as ArgumentsDelta."""
    index: int
    id: str
    name: str
    arguments: str  # JSON text


@dataclass(frozen=True, slots=True)
class ArgumentsDelta:
    index: int
    text: str


class ReplyReader:
    """Feed the reply's text as it comes (`feed`), then `finish`; each returns the
    events it completes: Content, Call and ArgumentsDelta, in reply order."""

    def __init__(self, tools: dict, *, call_id_prefix: str):
        self._choice = tools["choice"]
        self._json = tools.get("json", False)  # an `auto` reply constrained to content or calls
        self._parallel = tools.get("parallel", True)
        self._names = {d["function"]["name"] for d in tools["definitions"]}
        self._prefix = call_id_prefix
        self._buf = ""
        self._in_call = False
        self._after_call = False  # whitespace right after a call is not content
        self._pending_ws = ""  # trailing whitespace held back: it is not content if a call follows
        self._ws_before_block = ""
        self.num_calls = 0

    def feed(self, text: str) -> list:
        if isinstance(self._choice, dict):
            return self._named(text)
        self._buf += text
        return [] if self._choice == "required" or self._json else self._scan(final=False)

    def finish(self) -> list:
        if isinstance(self._choice, dict):
            return self._named("") if self.num_calls == 0 else []
        if self._json:
            calls = _calls_in(self._buf) if self._buf.lstrip().startswith("[") else None
            return self._calls(calls) if calls is not None and self._known(calls) else [Content(self._buf)]
        if self._choice == "required":  # constrained to a list of calls: never content
            calls = _calls_in(self._buf)
            return self._calls(calls if calls is not None and self._known(calls) else self._cut_off(self._buf))
        out = self._scan(final=True)
        if self.num_calls == 0 and self._pending_ws:
            out.append(Content(self._pending_ws))  # a reply without calls is content exactly as written
        return out

    def _call(self, name: str, arguments: str) -> Call:
        index, self.num_calls = self.num_calls, self.num_calls + 1
        return Call(index, f"{self._prefix}{index}", name, arguments)

    def _named(self, text: str) -> list:
        out = [] if self.num_calls else [self._call(self._choice["name"], "")]
        if text:
            out.append(ArgumentsDelta(0, text))
        return out

    def _known(self, calls: list[tuple[str, str]]) -> bool:
        return bool(calls) and all(name in self._names for name, _ in calls)

    def _calls(self, calls: list[tuple[str, str]]) -> list:
        if not self._parallel:
            calls = calls[:max(0, 1 - self.num_calls)]
        return [self._call(name, arguments) for name, arguments in calls]

    def _text(self, text: str, out: list) -> None:
        if self._after_call:
            text = text.lstrip()
            if not text:
                return
            self._after_call = False
        text = self._pending_ws + text
        core = text.rstrip()
        self._pending_ws = text[len(core):]
        if core:
            out.append(Content(core))

    def _scan(self, *, final: bool) -> list:
        out = []
        while True:
            if self._in_call:
                end = self._buf.find(CLOSE)
                if end < 0 and not final:
                    return out
                body, closed = (self._buf[:end], True) if end >= 0 else (self._buf, False)
                self._buf = self._buf[end + len(CLOSE):] if closed else ""
                self._in_call = False
                self._block(body, closed, out)
                if not closed:
                    return out
                continue
            start = self._buf.find(OPEN)
            if start >= 0:
                self._text(self._buf[:start], out)
                self._ws_before_block, self._pending_ws = self._pending_ws, ""
                self._buf, self._in_call = self._buf[start + len(OPEN):], True
                continue
            keep = _partial_open(self._buf)
            self._text(self._buf[:len(self._buf) - keep], out)
            self._buf = self._buf[len(self._buf) - keep:]
            if final and keep:  # a block's tag cut off at the end: not content, nor the space before it
                self._buf = self._pending_ws = ""
            return out

    def _cut_off(self, text: str) -> list[tuple[str, str]]:
        """The calls of a list of them cut off part-way: the whole ones, then the one
        cut off if its name was written (its arguments as far as they go)."""
        start = text.lstrip()
        at = len(text) - len(start) + 1 if start.startswith("[") else 0
        out = []
        while True:
            at = len(text) - len(text[at:].lstrip(" \t\n\r,"))
            try:
                item, at = _DECODER.raw_decode(text, at)
            except ValueError:
                cut = self._cut_call(text[at:])
                return out + ([cut] if cut else [])
            calls = _calls_in(json.dumps(item))
            if calls is None or not self._known(calls):
                return out
            out.extend(calls)

    def _cut_call(self, text: str) -> tuple[str, str] | None:
        """(name, arguments so far) of one call object cut off after its name, else None."""
        start = CALL_START.match(text)
        name = json.loads(start.group(1)) if start else None
        return (name, text[start.end():]) if name in self._names else None

    def _block(self, body: str, closed: bool, out: list) -> None:
        if not closed and body.lstrip()[:1] in ("", "{", "["):  # cut off inside a call
            cut = self._cut_off(body)
            out.extend(self._calls(cut))
            self._after_call = bool(cut)
            return
        calls = _calls_in(body)
        if calls is None or not self._known(calls):
            self._pending_ws = self._ws_before_block  # not a call: the text around it is content as written
            self._text(OPEN + body + (CLOSE if closed else ""), out)
            return
        out.extend(self._calls(calls))
        self._after_call = True


def _partial_open(text: str) -> int:
    """How many characters at the end of `text` could begin `<tool_call>`."""
    for k in range(min(len(OPEN) - 1, len(text)), 0, -1):
        if text.endswith(OPEN[:k]):
            return k
    return 0


def _calls_in(text: str) -> list[tuple[str, str]] | None:
    """[(name, arguments as JSON text)] of a call object or a list of them; None if it is not one."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return None
        if not isinstance(arguments, dict):
            return None
        out.append((item["name"], json.dumps(arguments, ensure_ascii=False)))
    return out


def read_whole(text: str, tools: dict, *, call_id_prefix: str) -> tuple[str | None, list[Call]]:
    """(content, calls) of a whole reply; content is None when the reply is only calls."""
    reader = ReplyReader(tools, call_id_prefix=call_id_prefix)
    return read_events(reader.feed(text) + reader.finish())


def read_events(events: list) -> tuple[str | None, list[Call]]:
    """(content, calls) the reader's events spell; content is None when there are only calls."""
    content = "".join(e.text for e in events if isinstance(e, Content))
    calls: dict[int, Call] = {}
    for e in events:
        if isinstance(e, Call):
            calls[e.index] = e
        elif isinstance(e, ArgumentsDelta):
            c = calls[e.index]
            calls[e.index] = Call(c.index, c.id, c.name, c.arguments + e.text)
    return (content or None) if calls else content, list(calls.values())
