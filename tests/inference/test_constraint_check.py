"""The worker's question to vLLM's structured-output code before a constrained request
reaches the engine (vLLM and xgrammar imported, the demo model's tokenizer, no engine):
what the engine would refuse or fail to compile is a problem in words, a compile past
its budget too, and the answer is kept for the next run with the same schema."""
import json
import time

import pytest
from django.conf import settings

from inference.constraint_check import ConstraintCheck

pytest.importorskip("vllm")
pytest.importorskip("xgrammar")


@pytest.fixture(scope="module")
def check():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(settings.CHATSITE["DEMO_MODELS_DIR"] / "smollm2-135m-instruct")
    return ConstraintCheck(tokenizer, len(tokenizer))


def _pattern(pattern: str) -> str:
    return json.dumps({"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}})


def test_a_schema_the_engine_compiles_has_no_problem(check):
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "o": {"$ref": "#/$defs/O"}},
              "$defs": {"O": {"type": "object", "properties": {"unit": {"enum": ["c", "f"]}}}}}
    assert check.problem(json.dumps(schema), budget_seconds=60) is None


@pytest.mark.parametrize("schema,words", [
    (_pattern(r"^(a)\1$"), "the engine refuses it"),  # a backreference: xgrammar and guidance refuse it
    (json.dumps({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}), "the engine refuses it"),
    (_pattern(r"^\w{1,129}$"), "the engine cannot compile it"),  # xgrammar 0.2.8's compile fails past 128
])
def test_what_the_engine_refuses_or_cannot_compile_is_a_problem(check, schema, words):
    problem = check.problem(schema, budget_seconds=60)
    assert problem is not None and problem.startswith(words), problem
    assert check.problem(schema, budget_seconds=0) == problem  # kept: asked again, answered at once


def test_a_compile_past_its_budget_is_refused_then_answered_when_it_ends(check):
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "string", "maxLength": 120}}})
    problem = check.problem(schema, budget_seconds=0.001)  # its compile takes seconds on this build
    assert problem is not None and "took longer than 0.001 s" in problem
    deadline = time.monotonic() + 120
    while check.problem(schema, budget_seconds=0.001) is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert check.problem(schema, budget_seconds=0) is None  # the compile went on; its answer is kept


def test_an_engine_with_xgrammar_named_refuses_what_only_guidance_takes(check):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(settings.CHATSITE["DEMO_MODELS_DIR"] / "smollm2-135m-instruct")
    compact = ConstraintCheck(tokenizer, len(tokenizer), backend="xgrammar", any_whitespace=False)
    schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 5}}})
    assert check.problem(schema, budget_seconds=60) is None  # auto: guidance takes it
    assert compact.problem(schema, budget_seconds=60).startswith("the engine refuses it")
    assert compact.problem(json.dumps({"type": "object", "properties": {"a": {"type": "string"}}}),
                           budget_seconds=60) is None  # compiled compact, as the engine compiles it
