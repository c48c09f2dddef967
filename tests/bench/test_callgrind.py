"""bench.platform_stack.Callgrind: the instructions of the last dump callgrind_control asked for."""
import subprocess

from bench import common
from bench.platform_stack import Callgrind


def test_the_count_is_the_newest_dumps_summary(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "LOG_DIR", tmp_path)
    asked = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: asked.append(cmd))
    cg = Callgrind("x")
    assert cg.wrap[:2] == ["valgrind", "--tool=callgrind"] and "--trace-children=yes" in cg.wrap  # past daphne's exec
    cg.zero(4321)
    for n, total in ((2, 900), (10, 1234), (9, 5)):  # dump 10 is the newest, not the last in name order
        (tmp_path / f"callgrind_x.out.{n}").write_text(f"events: Ir\nsummary: {total}\ntotals: {total}\n")
    assert cg.instructions() == 1234
    assert asked == [["callgrind_control", "-z", "4321"], ["callgrind_control", "-d", "4321"]]
    assert len(list(tmp_path.glob("callgrind_x.out.*"))) == 3  # kept for callgrind_annotate
    Callgrind("x")  # a new count starts without the old dumps
    assert list(tmp_path.glob("callgrind_x.out*")) == []
