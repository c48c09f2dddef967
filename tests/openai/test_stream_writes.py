"""A /v1 stream's writes (chatsite.openai_api.completions.views._stream): the opening at once, the
chunks as the run's entries come, and `data: [DONE]` in the same write as the last
chunks (each write is a send through the server: one fewer a call)."""
import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

from chatsite.openai_api.completions import views
from chatsite.openai_api.completions import wire
from chatsite.runs.stream import codec


class _Outlet:
    """The one way out, as a /v1 stream reads it (chatsite.runs.outlet.Outlet): these batches."""

    revoked = False

    def __init__(self, batches):
        self.batches = batches

    async def runs(self, run_ids, *, fresh):
        for batch in self.batches:
            yield batch


def _writes(monkeypatch, batches, n=1) -> list[bytes]:
    runs = [SimpleNamespace(pk=7 + i, pool=SimpleNamespace(name="flagship"), queued_at=None, sampling={})
            for i in range(n)]
    monkeypatch.setattr(wire, "chunk", lambda run, **kw: {"delta": kw.get("delta"), "finish": kw.get("finish"),
                                                        "index": kw.get("index")})

    async def collect():
        return [w async for w in views._stream(_Outlet(batches), runs, SimpleNamespace(include_usage=False, n=n),
                                               wire.CHAT, fresh=True)]

    with ThreadPoolExecutor(1) as pool:  # a loop of its own (the browser tests' sync API holds the main thread's)
        return pool.submit(asyncio.run, collect()).result(10)


def _events(write: bytes) -> list[str]:
    return [e.removeprefix("data: ") for e in write.decode().split("\n\n") if e]


def test_done_comes_in_the_last_chunks_write(monkeypatch):
    token = codec.Entry("1-0", codec.TOKEN, seq=0, n=1, text="Hi")
    done = codec.Entry("1-1", codec.DONE, finish_reason="stop", usage={"prompt_tokens": 3})
    writes = _writes(monkeypatch, [(0, [token]), None, (0, [done])])
    assert len(writes) == 4, writes  # the opening, the token, a keep-alive, then the end
    assert json.loads(_events(writes[0])[0])["delta"] == {"role": "assistant", "content": ""}
    assert writes[2] == wire.SSE_KEEPALIVE
    last = _events(writes[3])
    assert last[-1] == "[DONE]" and json.loads(last[0])["finish"] == "stop", last


def test_an_error_ends_the_stream_with_done_in_the_same_write(monkeypatch):
    failed = codec.Entry("1-0", codec.ERROR, code="engine_error", message="the engine stopped")
    writes = _writes(monkeypatch, [(0, [failed])])
    assert len(writes) == 2, writes
    last = _events(writes[1])
    assert json.loads(last[0])["error"]["code"] == "engine_error" and last[1] == "[DONE]", last


def test_every_choices_opening_is_one_write(monkeypatch):
    done = [codec.Entry(f"1-{i}", codec.DONE, finish_reason="stop") for i in range(3)]
    writes = _writes(monkeypatch, [(i, [done[i]]) for i in range(3)], n=3)
    assert [json.loads(e)["index"] for e in _events(writes[0])] == [0, 1, 2]
    assert len(writes) == 4 and _events(writes[3])[-1] == "[DONE]", writes
    assert all("[DONE]" not in w.decode() for w in writes[:3])
