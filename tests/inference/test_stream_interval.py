"""vLLM gathers a request's steps into one output per `stream_interval` (the worker asks for
about one per coalescing window): the text and the token count that reach the host are the
same, in fewer, larger chunks, whether the request ends by its length or by an abort. Run
through vLLM's own OutputProcessor and the flagship's tokenizer; no engine is started."""
import asyncio

import pytest
from django.conf import settings

from inference.types import GenerationRequest
from inference.stream_interval import MAX_STREAM_INTERVAL, stream_interval
from inference.vllm_backend import VllmBackend

vllm = pytest.importorskip("vllm")

TEXT = "The for statement repeats a block of code once for every item of a list, in order."


def test_the_interval_gives_about_one_output_per_window():
    assert stream_interval(0.02, 0.0) == 1  # no step measured yet: every step
    assert stream_interval(0.0, 0.002) == 1  # no window: every step
    assert stream_interval(0.02, 0.011) == 2  # a busy CPU engine: ~22 ms apart
    assert stream_interval(0.02, 0.0025) == 8  # one request alone: ~20 ms apart
    assert stream_interval(0.02, 0.05) == 1  # steps slower than the window: each one
    assert stream_interval(0.02, 0.0001) == MAX_STREAM_INTERVAL


class _Engine:
    """What VllmBackend.add needs of AsyncLLM, over vLLM's real OutputProcessor."""

    def __init__(self, tokenizer):
        from vllm.v1.engine.output_processor import OutputProcessor

        self.processor = OutputProcessor(tokenizer, log_stats=False)
        self.params = None

    async def add_request(self, request_id, prompt, params, priority=0):
        from vllm.v1.engine import EngineCoreRequest
        from vllm.v1.engine.output_processor import RequestOutputCollector

        self.params = params
        collector = RequestOutputCollector(params.output_kind, request_id)
        request = EngineCoreRequest(request_id, prompt["prompt_token_ids"], None, params, None, 0.0, None, None,
                                    None, external_req_id=request_id)
        self.processor.add_request(request, None, queue=collector)
        return collector

    def step(self, request_id: str, token: int, finish=None) -> None:
        from vllm.v1.engine import EngineCoreOutput

        self.processor.process_outputs([EngineCoreOutput(request_id, [token], finish_reason=finish)])


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(settings.CHATSITE["DEMO_MODELS_DIR"] / "smollm2-135m-instruct")


def _generate(tokenizer, step_seconds: float, tokens: list[int], abort_after: int | None = None, window=0.02):
    """The chunks the host gets for `tokens`, the engine's step time being `step_seconds`."""
    from vllm.v1.engine import FinishReason

    backend = VllmBackend(spec=None, output_window=window)
    backend.engine, backend.tokenizer, backend.counters.step_seconds = _Engine(tokenizer), tokenizer, step_seconds
    chunks = []
    asyncio.run(backend.add(GenerationRequest("r1", [1, 2, 3], max_tokens=len(tokens), ignore_eos=True),
                            chunks.append))
    for i, token in enumerate(tokens[:abort_after]):
        last = abort_after is None and i == len(tokens) - 1
        backend.engine.step("r1", token, FinishReason.LENGTH if last else None)
    if abort_after is not None:
        backend.engine.processor.abort_requests(["r1"], internal=True)
    return backend.engine.params, chunks


def test_gathered_outputs_carry_the_same_text_and_tokens(tokenizer):
    tokens = tokenizer.encode(TEXT, add_special_tokens=False)
    assert len(tokens) >= 15
    params, each = _generate(tokenizer, 0.05, tokens)  # slow steps: one output per step
    assert params.stream_interval is None and len(each) == len(tokens)
    params, gathered = _generate(tokenizer, 0.005, tokens)  # 5 ms steps, 20 ms window: every 4th step
    assert params.stream_interval == 4
    assert [c.num_tokens for c in gathered[:3]] == [1, 4, 4]  # the first token comes alone: it is the TTFT
    assert len(gathered) == 1 + -(-(len(tokens) - 1) // 4)
    for chunks in (each, gathered):
        assert "".join(c.text for c in chunks) == tokenizer.decode(tokens) == TEXT
        assert sum(c.num_tokens for c in chunks) == len(tokens)
        assert [c.finished for c in chunks] == [False] * (len(chunks) - 1) + [True]
        assert chunks[-1].finish_reason == "length"


def test_an_abort_brings_the_tokens_not_yet_sent(tokenizer):
    """A cancel or a drain: the tokens generated since the last output come with the
    abort, so what was streamed is all the engine made (a drained run resumes from it)."""
    tokens = tokenizer.encode(TEXT, add_special_tokens=False)
    params, chunks = _generate(tokenizer, 0.005, tokens, abort_after=7)
    assert [c.num_tokens for c in chunks] == [1, 4, 2] and chunks[-1].finish_reason == "abort"
    assert "".join(c.text for c in chunks) == tokenizer.decode(tokens[:7])


def test_the_window_may_be_the_writer_s_current_one(tokenizer):
    """The worker passes its writer's `window` (it grows with the runs streaming): read at each submission."""
    tokens = tokenizer.encode(TEXT, add_special_tokens=False)
    windows = iter([0.05, 0.02])
    params, chunks = _generate(tokenizer, 0.005, tokens, window=lambda: next(windows))
    assert params.stream_interval == 10 and [c.num_tokens for c in chunks[:2]] == [1, 10]
    params, _ = _generate(tokenizer, 0.005, tokens, window=lambda: next(windows))
    assert params.stream_interval == 4


def _fake_outputs(step_seconds: float, n_tokens: int, window: float, abort_after: int | None = None):
    """The chunks the fake engine hands out for an `n_tokens` reply (aborted once it made `abort_after`)."""
    from inference.fake_backend import FakeBackend

    async def go():
        backend, chunks = FakeBackend(step_seconds=step_seconds, output_window=window), []
        await backend.add(GenerationRequest("r1", [1, 2, 3], max_tokens=n_tokens, ignore_eos=True), chunks.append)
        while not (chunks and chunks[-1].finished):
            if abort_after is not None and backend.stats().generated_tokens >= abort_after:
                await backend.abort("r1")
                # Handed out within the abort, as vLLM's OutputProcessor.abort_requests does (above):
                # a stop is written at once, not at the engine's next step.
                assert chunks[-1].finished and chunks[-1].finish_reason == "abort"
                assert backend.stats().generated_tokens == sum(c.num_tokens for c in chunks)
            await asyncio.sleep(0)  # between two steps: the steps sleep their pace
        return chunks

    return asyncio.run(go())


def test_the_fake_engine_gathers_its_outputs_as_vllm_does(tokenizer):
    """A platform bench on the fake engine sees the hand-offs a worker gets from vLLM."""
    tokens = tokenizer.encode(TEXT, add_special_tokens=False)
    for step, window in ((0.005, 0.02), (0.002, 0.05), (0.05, 0.02)):
        _, real = _generate(tokenizer, step, tokens, window=window)
        fake = _fake_outputs(step, len(tokens), window)
        assert [c.num_tokens for c in fake] == [c.num_tokens for c in real], (step, window)
        assert [c.finished for c in fake] == [c.finished for c in real] and fake[-1].finish_reason == "length"
        assert "".join(c.text for c in fake).split() == _fake_words(len(tokens))
    _, real = _generate(tokenizer, 0.005, tokens, abort_after=7)
    fake = _fake_outputs(0.005, len(tokens), 0.02, abort_after=7)
    assert [c.num_tokens for c in fake] == [c.num_tokens for c in real] == [1, 4, 2]
    assert fake[-1].finish_reason == real[-1].finish_reason == "abort"


def _fake_words(n: int) -> list[str]:
    from inference.fake_backend import FakeBackend

    words = FakeBackend().reply_words(GenerationRequest("r1", [1, 2, 3], max_tokens=n, ignore_eos=True))
    return " ".join(words).split()
