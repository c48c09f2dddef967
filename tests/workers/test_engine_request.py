"""The worker builds the engine request from the run's saved sampling, every knob of it."""
import json

from chatsite.runs.store.claim import ClaimedRun
from workers.generation import engine_request

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _run(sampling: dict, tier: str = "interactive") -> ClaimedRun:
    return ClaimedRun(id=5, tenant_id=1, chat_id=1, assistant_message_id=2, tier=tier, source="api", attempt=1,
                      sampling=sampling, seed=11, max_tokens=9, prompt_tokens=3, budget_cap=None,
                      prompt_snapshot=[], raw_prompt=False, keeps_token_ids=True)


def test_every_saved_knob_reaches_the_engine_request():
    run = _run({"temperature": 0.3, "top_p": 0.8, "stop": ["END"], "ignore_eos": False, "top_k": 20, "min_p": 0.1,
                "frequency_penalty": 0.4, "presence_penalty": -0.5, "repetition_penalty": 1.2,
                "response_format": {"type": "json_schema", "name": "n", "schema": SCHEMA}}, tier="batch")
    req = engine_request(run, request_id="run-5-1", prompt_token_ids=[1, 2], max_tokens=9)
    assert (req.temperature, req.top_p, req.stop, req.seed, req.max_tokens) == (0.3, 0.8, ("END",), 11, 9)
    assert (req.top_k, req.min_p, req.frequency_penalty, req.presence_penalty, req.repetition_penalty) == (
        20, 0.1, 0.4, -0.5, 1.2)
    assert json.loads(req.json_schema) == SCHEMA and req.json_object is False and req.priority == 10


def test_json_object_and_runs_saved_before_the_knobs_existed():
    req = engine_request(_run({"response_format": {"type": "json_object"}}), request_id="r", prompt_token_ids=[1],
                         max_tokens=1)
    assert req.json_object is True and req.json_schema is None
    old = engine_request(_run({"temperature": 0.7, "top_p": 0.95, "stop": [], "ignore_eos": False}),
                         request_id="r", prompt_token_ids=[1], max_tokens=1)
    assert (old.top_k, old.min_p, old.frequency_penalty, old.presence_penalty, old.repetition_penalty,
            old.json_object, old.json_schema) == (0, 0.0, 0.0, 0.0, 1.0, False, None)


def test_logprobs_reach_the_engine_request_only_when_saved():
    asked = engine_request(_run({"logprobs": 4}), request_id="r", prompt_token_ids=[1], max_tokens=1)
    assert asked.logprobs == 4
    assert engine_request(_run({"logprobs": 0}), request_id="r", prompt_token_ids=[1], max_tokens=1).logprobs == 0
    assert engine_request(_run({}), request_id="r", prompt_token_ids=[1], max_tokens=1).logprobs is None


def test_vllms_own_knobs_reach_the_engine_request_only_when_saved():
    req = engine_request(_run({"min_tokens": 5, "logit_bias": {"17": -100.0, "3": 2.5}, "allowed_token_ids": [3, 17],
                               "guide": ["regex", "[ab]+"], "prompt_logprobs": 2, "return_token_ids": True,
                               "return_tokens_as_token_ids": True}),
                         request_id="r", prompt_token_ids=[1], max_tokens=4)
    assert (req.min_tokens, req.logit_bias, req.allowed_token_ids, req.guide) == (
        4, ((17, -100.0), (3, 2.5)), (3, 17), ("regex", "[ab]+"))  # min_tokens no more than the tokens left
    assert (req.prompt_logprobs, req.token_ids, req.tokens_as_ids, req.detailed) == (2, True, True, True)
    plain = engine_request(_run({}), request_id="r", prompt_token_ids=[1], max_tokens=4)
    assert (plain.min_tokens, plain.logit_bias, plain.allowed_token_ids, plain.guide, plain.prompt_logprobs,
            plain.detailed) == (0, (), None, None, None, False)
