"""What VllmBackend hands the host for vLLM's outputs (vLLM imported, no engine): a
request vLLM finished with finish_reason "error" (a grammar that failed to compile,
a KV load lost) is an error, never a reply of no tokens that reads as finished."""
import asyncio
from types import SimpleNamespace

import pytest

from inference.specs import EngineSpec
from inference.types import GenerationRequest
from inference.vllm_backend import VllmBackend

pytest.importorskip("vllm")


class _Engine:
    async def add_request(self, request_id, prompt, params, priority=0):
        return SimpleNamespace(output=None, put=None)


def _output(finish_reason: str, token_ids=()):
    """The fields of vLLM's RequestOutput that the backend reads (num_cached_tokens is None
    when the engine counted none)."""
    return SimpleNamespace(finished=True, num_cached_tokens=None,
                           outputs=[SimpleNamespace(text="", token_ids=list(token_ids), finish_reason=finish_reason)])


@pytest.mark.parametrize("reason,error", [("error", True), ("stop", False), ("length", False)])
def test_a_request_vllm_finished_with_an_error_is_an_error(reason, error):
    backend = VllmBackend(EngineSpec(pool="p", model="m", max_model_len=64))
    backend.engine = _Engine()
    chunks = []
    request = GenerationRequest("r", [1, 2], max_tokens=4, json_schema='{"type": "object"}')
    collector = asyncio.run(_added(backend, request, chunks.append))
    collector.put(_output(reason))
    [chunk] = chunks
    assert chunk.finished and (chunk.error is not None) == error
    assert chunk.finish_reason == (None if error else reason)


async def _added(backend, request, emit):
    collectors = []
    original = backend.engine.add_request

    async def add_request(*args, **kwargs):
        collectors.append(await original(*args, **kwargs))
        return collectors[-1]

    backend.engine.add_request = add_request
    await backend.add(request, emit)
    return collectors[0]
