"""The numbering of a response's events, from run stream entries alone (no server)."""
import json

from chatsite.openai_api.responses.events import LIFE_EVENTS, OPENING_EVENTS, ResponseEvents
from chatsite.runs.stream import codec

BASE = {"id": "resp_7", "created_at": 1, "background": False, "instructions": None, "max_output_tokens": 10,
        "model": "flagship", "previous_response_id": None, "temperature": 0.7, "top_p": 1.0, "metadata": {},
        "tools": [], "tool_choice": "auto", "parallel_tool_calls": True, "text": {"format": {"type": "text"}},
        "store": True, "run_tools": None}


def _tokens(*texts, attempt=1):
    out, seq = [], 0
    for i, text in enumerate(texts):
        out.append(codec.Entry(f"{i + 1}-0", codec.TOKEN, seq=seq, n=2, text=text, attempt=attempt))
        seq += 2
    return out


def _read(entries, base=BASE) -> list[tuple[int, bytes]]:
    events = ResponseEvents(base, 7)
    return events.opening() + [e for entry in entries for e in events.feed(entry)]


def _decoded(events):
    return [json.loads(data.split(b"\ndata: ", 1)[1]) for _, data in events]


def test_one_delta_per_token_entry_then_the_closing_events():
    done = codec.done_entry(finish_reason="stop", prompt_tokens=3, completion_tokens=4, entry_id="3-0")
    events = _read(_tokens("Hello", " there") + [done])
    assert [n for n, _ in events] == list(range(OPENING_EVENTS + 2 + 4))
    decoded = _decoded(events)
    assert [e["type"] for e in decoded][OPENING_EVENTS:] == [
        "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed"]
    assert [e["sequence_number"] for e in decoded] == [n for n, _ in events]
    final = decoded[-1]["response"]
    assert final["output"][0]["content"][0]["text"] == "Hello there" == decoded[-4]["text"]
    assert final["usage"]["input_tokens"] == 3 and final["usage"]["output_tokens"] == 4
    assert _read(_tokens("Hello", " there") + [done]) == events  # read again: the same bytes


def test_a_length_stop_is_incomplete_and_a_failure_is_failed_alone():
    length = codec.done_entry(finish_reason="length", prompt_tokens=3, completion_tokens=2)
    last = _decoded(_read(_tokens("Hi") + [length]))[-1]
    assert last["type"] == "response.incomplete" and last["response"]["incomplete_details"] == {
        "reason": "max_output_tokens"}
    failed = _decoded(_read(_tokens("Hi") + [codec.error_entry(code="engine_error", message="boom")]))
    assert [e["type"] for e in failed][OPENING_EVENTS:] == ["response.output_text.delta", "response.failed"]
    assert failed[-1]["response"]["error"] == {"code": "engine_error", "message": "boom"}
    assert failed[-1]["response"]["output"] == [] and failed[-1]["response"]["status"] == "failed"


def test_a_snapshot_is_the_whole_text_in_one_delta_and_a_background_one_opens_queued():
    done = codec.done_entry(finish_reason="stop", prompt_tokens=3, completion_tokens=4)
    decoded = _decoded(_read([codec.snapshot_entry(text="Hello there", n=4), done], {**BASE, "background": True}))
    assert decoded[0]["response"]["status"] == "queued" and decoded[1]["response"]["status"] == "in_progress"
    assert [e["delta"] for e in decoded if e["type"] == "response.output_text.delta"] == ["Hello there"]
    assert decoded[-1]["response"]["usage"]["output_tokens"] == 4 and len(decoded) == OPENING_EVENTS + 1 + 4


def test_a_stream_written_again_after_a_loss_numbers_apart_and_knows_a_lost_lifes_numbers():
    """Its entries lost, a run's stream is written again from token 0 by a later attempt,
    in other entries: the new life's events after the opening ones are numbered from its
    own base, and a number of the lost life is recognised as not this stream's."""
    done = codec.done_entry(finish_reason="stop", prompt_tokens=3, completion_tokens=4)
    lost = ResponseEvents(BASE, 7)
    lost_numbers = [n for n, _ in lost.opening() + [e for entry in _tokens("Hel", "lo th") for e in lost.feed(entry)]]
    assert lost_numbers == list(range(OPENING_EVENTS + 2))
    again = ResponseEvents(BASE, 7)
    events = again.opening() + [e for entry in _tokens("Hello", " there", attempt=2) + [done]
                                for e in again.feed(entry)]
    numbers = [n for n, _ in events]
    base = OPENING_EVENTS + LIFE_EVENTS
    assert numbers == list(range(OPENING_EVENTS)) + list(range(base, base + 2 + 4))
    assert [e["sequence_number"] for e in _decoded(events)] == numbers
    assert [again.holds(n) for n in lost_numbers] == [True] * OPENING_EVENTS + [False, False]
    assert all(again.holds(n) for n in numbers) and all(lost.holds(n) for n in lost_numbers)
    told = json.loads(again.restarted().split(b"\ndata: ", 1)[1])
    assert told["type"] == "error" and told["code"] == "stream_restarted" and told["param"] == "starting_after"


def test_a_tool_runs_items_begin_as_its_reply_is_read_and_read_again_are_the_same_bytes():
    from chatsite.openai_api.responses.events import events_for

    tools = {"definitions": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
             "choice": "auto", "parallel": True}
    base = {**BASE, "run_tools": tools}
    pieces = ["Let me ", "check.\n<tool", '_call>{"name": "f", "arg', 'uments": {"x": 1}}</tool_call>']
    done = codec.done_entry(finish_reason="stop", prompt_tokens=3, completion_tokens=8, entry_id="9-0")

    def read():
        events = events_for(base, 7, logprobs=False)
        return events.opening() + [e for entry in _tokens(*pieces) + [done] for e in events.feed(entry)]

    events = read()
    assert [n for n, _ in events] == list(range(len(events))) and read() == events
    decoded = _decoded(events)
    assert [e["type"] for e in decoded] == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.delta", "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed"]
    final = decoded[-1]["response"]
    assert [i["type"] for i in final["output"]] == ["message", "function_call"]
    assert final["output"][0]["content"][0]["text"] == "Let me check." == decoded[10]["text"]
    assert final["output"][1] == decoded[9]["item"] and final["output"][1]["arguments"] == '{"x": 1}'
    assert final["output"][1]["call_id"] == "call_7_0" and final["output"][1]["id"] == "fc_7_0"
