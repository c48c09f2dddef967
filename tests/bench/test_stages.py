"""Stage marks (chatsite/stage_trace.py) and how bench.probes.stages reads them: off by default,
written in batches and at flush when on, and an untagged mark belongs to the next tagged
one of its own process."""
from bench.probes import stages, steer_stages
from chatsite import stage_trace


def test_marks_cost_nothing_and_write_nothing_when_off(tmp_path, monkeypatch):
    monkeypatch.setattr(stage_trace, "_PATH", None)
    stage_trace.mark("web.request")
    stage_trace.flush()
    assert not stage_trace.enabled() and stage_trace._lines == []


def test_marks_are_batched_then_flushed(tmp_path, monkeypatch):
    path = tmp_path / "stages.txt"
    monkeypatch.setattr(stage_trace, "_PATH", str(path))
    monkeypatch.setattr(stage_trace, "_lines", [])
    stage_trace.mark("web.request")
    stage_trace.mark("web.saved", 7)
    assert not path.exists()  # nothing written per mark
    stage_trace.flush()
    (_, pid, thread, stage, run, cpu), second = [line.split() for line in path.read_text().splitlines()]
    assert (stage, run, second[3], second[4]) == ("web.request", "-", "web.saved", "7")
    assert float(cpu) >= 0 and int(pid) > 0 and int(thread) > 0
    for i in range(stage_trace.FLUSH_EVERY):
        stage_trace.mark("worker.task")
    assert len(path.read_text().splitlines()) == 2 + stage_trace.FLUSH_EVERY and stage_trace._lines == []


def _line(t: float, pid: int, stage: str, run="-", thread=1, cpu=0.0) -> str:
    return f"{t:.6f} {pid} {thread} {stage} {run} {cpu:.3f}\n"


def test_an_untagged_mark_belongs_to_the_next_tagged_one_of_its_process(tmp_path):
    path = tmp_path / "stages.txt"
    path.write_text("".join([
        _line(1.000, 10, "web.request"),  # a chat POST before the message's: superseded by the next
        _line(1.300, 10, "web.request"),
        _line(1.305, 20, "worker.task"),  # another process: waits for its own tagged mark
        _line(1.304, 10, "web.saved", 5),
        _line(1.310, 20, "worker.claimed", 5),
        _line(1.320, 20, "engine.first_output", 5),
        _line(1.330, 20, "engine.first_output", 5),  # a repeat: the first one counts
        _line(2.000, 10, "web.request"),
        _line(2.004, 10, "web.saved", 6),
    ]))
    runs = stages.read(path)
    assert runs[5]["web.request"][0] == 1.300 and runs[5]["web.saved"][0] == 1.304
    assert runs[5]["worker.task"][0] == 1.305 and runs[5]["engine.first_output"][0] == 1.320
    assert runs[6]["web.request"][0] == 2.000 and "worker.task" not in runs[6]


def test_the_table_splits_a_runs_time_to_its_first_token(tmp_path):
    path = tmp_path / "stages.txt"
    marks = stages.STAGES[1:-1]
    path.write_text("".join(_line(10 + 0.001 * (i + 1), 1, stage, run=3 if i else "-", thread=5, cpu=0.1 * i)
                            for i, stage in enumerate(marks)))
    ttft = len(marks) + 3.0  # ms: the first token 3 ms after the last mark
    text = stages.table(path, [{"run": 3, "w0": 10.0, "client_ttft_ms": ttft}])
    assert text.startswith("1 runs with every stage")
    rows = {cells[1].strip(): [c.strip() for c in cells[2:5]]
            for cells in (line.split("|") for line in text.splitlines()[3:])}
    assert rows["client.post -> web.request"][0] == "1.0" and rows["client TTFT"][0] == f"{ttft:.1f}"
    assert rows["writer.first_written -> client.first_token"][0] == "3.0"
    assert rows["web.saved -> web.committed"][2] == "0.1"  # one thread's CPU between its two marks
    assert rows["client.post -> web.request"][2] == "-"  # two clocks: no CPU figure


def test_a_send_nows_round_joins_the_stopped_and_the_steered_runs_marks(tmp_path):
    path = tmp_path / "stages.txt"
    path.write_text("".join([
        _line(0.500, 10, "web.saved", 4),  # the stopped run's own admission: not this round's
        _line(0.900, 20, "worker.received"),  # before the send now: another round's
        _line(1.003, 10, "web.stop_asked", 4),  # the stop first
        _line(1.010, 10, "web.saved", 5),  # the steered run, admitted as the reply stops
        _line(1.012, 10, "web.send_now_saved", 4),
        _line(1.014, 20, "worker.received"),
        _line(1.020, 20, "finalize.saved", 4),
        _line(1.040, 20, "worker.leased", 5),
        _line(1.045, 20, "worker.claimed", 5),
        _line(1.046, 20, "worker.settled", 5),
        _line(1.070, 20, "engine.first_output", 5),
    ]))
    tagged, untagged = steer_stages._read(path)
    marks = steer_stages.round_marks(tagged, untagged, {"stopped": 4, "steered": 5, "t0": 1.000,
                                                        "first_token_at": 1.071})
    assert marks["web.stop_asked"] == 1.003 and marks["web.saved"] == 1.010  # the steered run's admission
    assert marks["worker.received"] == 1.014 and marks["finalize.saved"] == 1.020
    assert "queue.advance" not in marks and marks["stream.first_token"] == 1.071
    text = steer_stages.table(path, [{"stopped": 4, "steered": 5, "t0": 1.000, "first_token_at": 1.071}])
    rows = {cells[1].strip(): cells[2].strip() for cells in (line.split("|") for line in text.splitlines()[3:])}
    assert rows["worker.claimed -> worker.settled"] == "1.0"
    assert rows["client.send_now -> stream.first_token"] == "71.0"
    assert rows["web.saved -> worker.settled (the platform's part)"] == "36.0"  # the save to the settled claim


def test_a_steered_run_admitted_after_the_reply_was_saved_has_nothing_to_settle(tmp_path):
    path = tmp_path / "stages.txt"
    path.write_text("".join([
        _line(1.003, 10, "web.stop_asked", 4),
        _line(1.008, 20, "finalize.saved", 4),
        _line(1.010, 10, "web.saved", 5),  # the door read the reply as saved: no stand-in in its snapshot
        _line(1.030, 20, "worker.claimed", 5),
        _line(1.050, 20, "engine.first_output", 5),
    ]))
    text = steer_stages.table(path, [{"stopped": 4, "steered": 5, "t0": 1.000, "first_token_at": 1.051}])
    rows = {cells[1].strip(): cells[2].strip() for cells in (line.split("|") for line in text.splitlines()[3:])}
    assert rows["worker.claimed -> worker.settled"] == "0.0"
    assert rows["web.saved -> worker.settled (the platform's part)"] == "20.0"

