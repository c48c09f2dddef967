"""A constrained reply carried on by another attempt: vLLM's grammar starts where the reply stopped.

When a worker dies part-way through a reply under a grammar (a JSON Schema, a tool call,
a guide), the next attempt sends the reply so far at the end of its prompt. vLLM builds a
request's grammar matcher fresh, at the grammar's start, and feeds it only the tokens the
request generates: the model would be made to open a second JSON value after the first
one's beginning. vLLM 0.32 has no way to start a request's grammar part-way, so this
module builds one at the engine seam (why it is a hack: it wraps a private method of
vLLM's StructuredOutputManager; `tests/inference/test_carried_grammar.py` fails if that
seam changes):

- the request carries the ids of the reply so far in `SamplingParams.extra_args`
  (`CARRIED_IDS`, vLLM's field for what plugins read, unused by vLLM itself);
- in the engine-core process (where vLLM's scheduler and grammars live), the
  scheduler is built through `scheduler` (vLLM's `scheduler_cls` engine argument, which
  the engine core resolves by name: the only code of ours that runs there is reached
  this way), which is vLLM's own scheduler for the config, after it has wrapped the
  engine's StructuredOutputManager's `_create_grammar`;
- the wrapper advances each new grammar over the carried ids (`accept_tokens`, the
  grammar interface vLLM's xgrammar, guidance, outlines and lm-format-enforcer backends
  all implement) before the request is scheduled (vLLM waits for the grammar to be
  ready): the first token it masks is the one after the carried text.

A carried text the grammar does not accept fails the request as a grammar that does not
compile does (vLLM's finish_reason "error"), never a reply that breaks its format.
"""
import logging
from types import SimpleNamespace

log = logging.getLogger(__name__)

CARRIED_IDS = "chatsite_carried_ids"  # SamplingParams.extra_args key: the reply's token ids so far
SCHEDULER = f"{__name__}.scheduler"  # vLLM's scheduler_cls engine argument


def carried_extra_args(carried_ids) -> dict | None:
    """The SamplingParams.extra_args of a request whose grammar starts after `carried_ids`."""
    return {CARRIED_IDS: list(carried_ids)} if carried_ids else None


class CarriedTextRejected(ValueError):
    """The grammar does not accept what earlier attempts wrote."""


def advance(grammar, request) -> None:
    """Feed `grammar` (vLLM's StructuredOutputGrammar) the request's carried ids, if any.
    Raises CarriedTextRejected if it refuses one."""
    extra = getattr(request.sampling_params, "extra_args", None) or {}
    carried = extra.get(CARRIED_IDS)
    if carried and not grammar.accept_tokens(request.request_id, list(carried)):
        raise CarriedTextRejected(f"request {request.request_id}: the grammar rejects the reply carried on")


def carry_grammars(manager) -> None:
    """Make `manager` (vLLM's StructuredOutputManager) advance every grammar it creates
    over its request's carried ids. Its grammar_init calls `self._create_grammar(request)`
    (on its compile executor, or inline), so the instance's own attribute takes its place."""
    create = type(manager)._create_grammar.__get__(manager)

    def create_carried(request):
        grammar = create(request)
        advance(grammar, request)
        return grammar

    manager._create_grammar = create_carried


def scheduler(*args, structured_output_manager, vllm_config, **kwargs):
    """vLLM's own scheduler for `vllm_config` (the class its scheduler_cls unset would
    pick), built as the engine core builds it, its grammars carried (carry_grammars)."""
    from vllm.config.scheduler import SchedulerConfig

    carry_grammars(structured_output_manager)
    unset = SimpleNamespace(scheduler_cls=None, async_scheduling=vllm_config.scheduler_config.async_scheduling)
    cls = SchedulerConfig.get_scheduler_cls(unset)
    log.info("engine core: %s.%s, constrained replies carried on by another attempt keep their grammar",
             cls.__module__, cls.__qualname__)
    return cls(*args, structured_output_manager=structured_output_manager, vllm_config=vllm_config, **kwargs)
