"""The one reader of a tool run's reply: whole or in pieces split anywhere, the same
content and calls; the call markup never reaches the content."""
import pytest

from chatsite.openai_api.tools.reader import ArgumentsDelta, Call, Content, ReplyReader, read_whole

DEFS = [{"type": "function", "function": {"name": "weather"}}, {"type": "function", "function": {"name": "clock"}}]
AUTO = {"definitions": DEFS, "choice": "auto", "parallel": True}
CALL = '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>'
REPLIES = [
    "Just words, no call.  \n",
    "Let me check.\n" + CALL,
    CALL + "\n" + CALL.replace("weather", "clock").replace("city", "zone"),
    '<tool_call>[{"name": "weather", "arguments": {}}, {"name": "clock", "arguments": "{\\"zone\\": \\"UTC\\"}"}]'
    "</tool_call>",
    "A < b and <tool_cal is not a call; " + '<tool_call>{"name": "nope", "arguments": {}}</tool_call> neither.',
    "Cut short " + CALL[:30],
    "<tool_call>not json</tool_call>",
]


def _streamed(text: str, tools: dict, size: int) -> list:
    reader = ReplyReader(tools, call_id_prefix="call_9_")
    events = []
    for i in range(0, len(text), size):
        events += reader.feed(text[i:i + size])
    return events + reader.finish()


def _merged(events: list) -> tuple[str, list[tuple]]:
    content, calls = "", {}
    for e in events:
        if isinstance(e, Content):
            content += e.text
        elif isinstance(e, Call):
            calls[e.index] = [e.id, e.name, e.arguments]
        else:
            calls[e.index][2] += e.text
    return content, [tuple(c) for c in calls.values()]


@pytest.mark.parametrize("text", REPLIES)
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_pieces_of_any_size_read_as_the_whole_reply(text, size):
    content, calls = read_whole(text, AUTO, call_id_prefix="call_9_")
    got_content, got_calls = _merged(_streamed(text, AUTO, size))
    assert got_calls == [(c.id, c.name, c.arguments) for c in calls]
    assert got_content == (content or "")
    assert "<tool_call>" not in got_content or "nope" in text or "not json" in text or "Cut" in text


def test_content_and_calls_of_an_auto_reply():
    assert read_whole(REPLIES[0], AUTO, call_id_prefix="c") == (REPLIES[0], [])  # exactly as written
    content, calls = read_whole(REPLIES[1], AUTO, call_id_prefix="call_9_")
    assert content == "Let me check." and calls == [Call(0, "call_9_0", "weather", '{"city": "Paris"}')]
    content, calls = read_whole(REPLIES[2], AUTO, call_id_prefix="c")
    assert content is None and [c.name for c in calls] == ["weather", "clock"]
    _, calls = read_whole(REPLIES[3], AUTO, call_id_prefix="c")
    assert [(c.name, c.arguments) for c in calls] == [("weather", "{}"), ("clock", '{"zone": "UTC"}')]
    content, calls = read_whole(REPLIES[4], AUTO, call_id_prefix="c")
    assert calls == [] and content == REPLIES[4]  # an unknown function's block is passed on as written


def test_without_parallel_calls_only_the_first_is_kept():
    content, calls = read_whole(REPLIES[2], {**AUTO, "parallel": False}, call_id_prefix="c")
    assert [c.name for c in calls] == ["weather"]


def test_an_unclosed_block_at_the_end_is_still_a_call_if_its_json_is_whole():
    _, calls = read_whole('<tool_call>{"name": "clock", "arguments": {"zone": "CET"}}', AUTO, call_id_prefix="c")
    assert [(c.name, c.arguments) for c in calls] == [("clock", '{"zone": "CET"}')]


def test_a_named_choice_streams_the_arguments_as_they_come():
    tools = {**AUTO, "choice": {"name": "clock"}}
    assert _streamed('{"zone": "UTC"}', tools, 4) == [
        Call(0, "call_9_0", "clock", ""), ArgumentsDelta(0, '{"zo'), ArgumentsDelta(0, 'ne":'),
        ArgumentsDelta(0, ' "UT'), ArgumentsDelta(0, 'C"}')]


def test_a_required_reply_is_never_content():
    tools = {**AUTO, "choice": "required"}
    assert read_whole('[{"name": "weather", "arguments": {}}]', tools, call_id_prefix="c")[1][0].name == "weather"
    assert read_whole('[{"name": "weath', tools, call_id_prefix="c") == ("", [])


WHOLE = '[{"name": "weather", "arguments": {"city": "Paris"}}, {"name": "clock", "arguments": {"zone": "CET"}}]'


@pytest.mark.parametrize("cut,calls", [
    (1, []),  # cut before the first call's name: no call, no content
    (20, []),
    (40, [("weather", '{"city')]),  # the name written: the call, with the arguments written so far
    (58, [("weather", '{"city": "Paris"}')]),
    (95, [("weather", '{"city": "Paris"}'), ("clock", '{"zone": "')]),
], ids=["start", "in-name", "in-arguments", "after-first", "in-second"])
def test_a_required_reply_cut_off_carries_the_calls_whose_names_were_written(cut, calls):
    tools = {**AUTO, "choice": "required"}
    for size in (1, 3, 1000):
        content, events = _merged(_streamed(WHOLE[:cut], tools, size))
        assert content == "" and [(name, arguments) for _, name, arguments in events] == calls


@pytest.mark.parametrize("cut,content,calls", [
    (len("Let me check.\n<tool_c"), "Let me check.", []),  # the tag cut off is not content
    (len("Let me check.\n" + CALL[:25]), "Let me check.", []),  # cut before the name
    (len("Let me check.\n" + CALL[:60]), "Let me check.", [("weather", '{"city": "Paris')]),
])
def test_an_auto_reply_cut_off_inside_a_block_never_shows_its_markup(cut, content, calls):
    text = ("Let me check.\n" + CALL)[:cut]
    for size in (1, 3, 1000):
        got_content, events = _merged(_streamed(text, AUTO, size))
        assert got_content == content and [(name, arguments) for _, name, arguments in events] == calls
