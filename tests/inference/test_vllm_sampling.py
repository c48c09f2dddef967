"""The engine request maps onto vLLM's SamplingParams, knob by knob (vLLM imported, no engine)."""
import json

import pytest

from inference.types import GenerationRequest
from inference.vllm_backend import sampling_params

vllm = pytest.importorskip("vllm")
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def test_every_knob_is_mapped():
    p = sampling_params(GenerationRequest("r", [1], max_tokens=7, temperature=0.6, top_p=0.9, seed=3, stop=("x",),
                                          top_k=30, min_p=0.2, frequency_penalty=0.5, presence_penalty=-1.0,
                                          repetition_penalty=1.3, ignore_eos=True))
    assert (p.max_tokens, p.temperature, p.top_p, p.seed, p.stop, p.ignore_eos) == (7, 0.6, 0.9, 3, ["x"], True)
    assert (p.top_k, p.min_p, p.frequency_penalty, p.presence_penalty, p.repetition_penalty) == (
        30, 0.2, 0.5, -1.0, 1.3)
    assert p.structured_outputs is None and p.n == 1
    assert p.output_kind == vllm.sampling_params.RequestOutputKind.DELTA


def test_structured_outputs():
    p = sampling_params(GenerationRequest("r", [1], max_tokens=7, json_schema=json.dumps(SCHEMA)))
    assert json.loads(p.structured_outputs.json) == SCHEMA and p.structured_outputs.json_object is None
    p = sampling_params(GenerationRequest("r", [1], max_tokens=7, json_object=True))
    assert p.structured_outputs.json_object is True and p.structured_outputs.json is None


def test_defaults_are_vllms():
    p = sampling_params(GenerationRequest("r", [1], max_tokens=7))
    d = vllm.SamplingParams(max_tokens=7)
    assert (p.top_k, p.min_p, p.frequency_penalty, p.presence_penalty, p.repetition_penalty) == (
        d.top_k, d.min_p, d.frequency_penalty, d.presence_penalty, d.repetition_penalty)


def test_logprobs_are_asked_for_only_when_the_request_does():
    assert sampling_params(GenerationRequest("r", [1], max_tokens=7, logprobs=3)).logprobs == 3
    assert sampling_params(GenerationRequest("r", [1], max_tokens=7, logprobs=0)).logprobs == 0
    assert sampling_params(GenerationRequest("r", [1], max_tokens=7)).logprobs is None


def test_any_64_bit_seed_is_a_seed_to_vllm():
    assert sampling_params(GenerationRequest("r", [1], max_tokens=7, seed=-1)).seed == 2**64 - 1  # -1 is not "none"
    assert sampling_params(GenerationRequest("r", [1], max_tokens=7, seed=-(2**63))).seed == 2**63
    assert sampling_params(GenerationRequest("r", [1], max_tokens=7, seed=5)).seed == 5


def test_vllms_own_knobs_are_mapped():
    p = sampling_params(GenerationRequest("r", [1], max_tokens=7, min_tokens=3, logit_bias=((5, -100.0),),
                                          allowed_token_ids=(5, 9), prompt_logprobs=2))
    assert (p.min_tokens, p.logit_bias, p.allowed_token_ids, p.prompt_logprobs) == (3, {5: -100.0}, [5, 9], 2)
    assert sampling_params(GenerationRequest("r", [1], max_tokens=7, guide=("regex", "a+"))).structured_outputs.regex \
        == "a+"
    choice = sampling_params(GenerationRequest("r", [1], max_tokens=7, guide=("choice", '["yes", "no"]')))
    assert choice.structured_outputs.choice == ["yes", "no"]
    grammar = sampling_params(GenerationRequest("r", [1], max_tokens=7, guide=("grammar", 'root ::= "a"')))
    assert grammar.structured_outputs.grammar == 'root ::= "a"'
