"""The seam that lets a constrained reply carried on by another attempt keep its grammar
(inference.carried_grammar), against vLLM's own code (vLLM, xgrammar and llguidance
imported, the demo model's tokenizer, no engine): vLLM's StructuredOutputManager, its
grammars advanced over the carried ids, masks from the token after the reply so far, for
each backend the worker may get; a reply so far the grammar rejects fails the request; the
engine core's scheduler is vLLM's own. These fail if vLLM's seam moves underneath it."""
import json
from types import SimpleNamespace

import pytest
from django.conf import settings

from inference.carried_grammar import CARRIED_IDS, SCHEDULER, CarriedTextRejected, carry_grammars, scheduler
from inference.types import GenerationRequest
from inference.vllm_backend import sampling_params

pytest.importorskip("vllm")
pytest.importorskip("xgrammar")

SCHEMA = json.dumps({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
                     "required": ["name", "n"], "additionalProperties": False})


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(settings.CHATSITE["DEMO_MODELS_DIR"] / "smollm2-135m-instruct")


def _manager(tokenizer):
    """vLLM's StructuredOutputManager as the engine core makes it, with only the config it
    reads (grammars compiled inline, as its external_launcher mode does), carried."""
    from vllm.v1.structured_output import StructuredOutputManager

    config = SimpleNamespace(
        parallel_config=SimpleNamespace(distributed_executor_backend="external_launcher"),
        scheduler_config=SimpleNamespace(max_num_seqs=4), speculative_config=None,
        model_config=SimpleNamespace(skip_tokenizer_init=True, get_vocab_size=lambda: len(tokenizer),
                                     hf_config=SimpleNamespace(model_type="llama")),
        structured_outputs_config=SimpleNamespace(enable_in_reasoning=False, disable_any_whitespace=False,
                                                  disable_additional_properties=False, reasoning_parser=None,
                                                  reasoning_parser_plugin=None))
    manager = StructuredOutputManager(config)
    manager.tokenizer = tokenizer  # what it loads itself unless skip_tokenizer_init
    carry_grammars(manager)
    return manager


def _grammar(manager, tokenizer, backend: str, so_far: str):
    """The grammar vLLM's engine core makes for a request the worker sends, `so_far` carried."""
    from vllm.v1.structured_output.request import StructuredOutputRequest

    ids = tuple(tokenizer.encode(so_far, add_special_tokens=False))
    params = sampling_params(GenerationRequest("r", [1, 2, 3], 50, json_schema=SCHEMA, carried_ids=ids))
    params.structured_outputs._backend = backend  # what vLLM's front end sets when it validates the request
    request = SimpleNamespace(request_id="r", sampling_params=params, prompt_token_ids=[1, 2, 3, *ids],
                              structured_output_request=StructuredOutputRequest.from_sampling_params(params))
    manager.grammar_init(request)
    return request.structured_output_request.grammar


@pytest.mark.parametrize("backend", ["xgrammar", "guidance"])
def test_a_carried_grammar_goes_on_from_the_reply_so_far(tokenizer, backend):
    manager = _manager(tokenizer)
    rest = tokenizer.encode('b", "n": 7}', add_special_tokens=False)
    carried = _grammar(manager, tokenizer, backend, '{"name": "Bo')
    assert not isinstance(carried, Exception)
    assert carried.accept_tokens("r", rest) and carried.accept_tokens("r", [tokenizer.eos_token_id])
    assert carried.is_terminated()  # the value is whole: the reply ends there
    fresh = _grammar(_manager(tokenizer), tokenizer, backend, "")
    assert not fresh.accept_tokens("r", rest)  # as vLLM alone would: the grammar at its start refuses it


@pytest.mark.parametrize("backend", ["xgrammar", "guidance"])
def test_a_reply_so_far_the_grammar_rejects_fails_the_request(tokenizer, backend):
    grammar = _grammar(_manager(tokenizer), tokenizer, backend, '{"name": 5')
    assert isinstance(grammar, CarriedTextRejected)  # vLLM's scheduler fails such a request (finish_reason error)


def test_the_carried_ids_reach_vllm_only_under_a_grammar():
    constrained = sampling_params(GenerationRequest("r", [1], 5, json_object=True, carried_ids=(7, 8)))
    assert constrained.extra_args == {CARRIED_IDS: [7, 8]}
    assert sampling_params(GenerationRequest("r", [1], 5, json_object=True)).extra_args is None
    assert sampling_params(GenerationRequest("r", [1], 5, carried_ids=(7, 8))).extra_args is None


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_the_engine_core_builds_vllms_own_scheduler_through_the_seam(tokenizer, async_scheduling, monkeypatch):
    from vllm.config.scheduler import SchedulerConfig
    from vllm.v1.core.sched import async_scheduler as async_module, scheduler as sync_module

    built = {}

    class Spy:
        def __init__(self, **kwargs):
            built.update(kwargs, cls=self.__class__)

    sync_spy, async_spy = type("Scheduler", (Spy,), {}), type("AsyncScheduler", (Spy,), {})
    monkeypatch.setattr(sync_module, "Scheduler", sync_spy)
    monkeypatch.setattr(async_module, "AsyncScheduler", async_spy)
    resolved = SchedulerConfig.get_scheduler_cls(SimpleNamespace(scheduler_cls=SCHEDULER, async_scheduling=False))
    assert resolved is scheduler  # the name the engine arguments carry resolves to it, in any process
    manager = _manager(tokenizer)
    config = SimpleNamespace(scheduler_config=SimpleNamespace(async_scheduling=async_scheduling))
    resolved(vllm_config=config, kv_cache_config="kv", structured_output_manager=manager, log_stats=False)
    assert built["cls"] is (async_spy if async_scheduling else sync_spy)
    assert built["structured_output_manager"] is manager and built["kv_cache_config"] == "kv"
