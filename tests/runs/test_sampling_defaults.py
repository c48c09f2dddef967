"""A sampling knob the client leaves out takes its pool's default, else the one table of
defaults (inference.types.SAMPLING_DEFAULTS) that the engine request also falls back on."""
import pytest

from chatsite.runs.models import GenerationRun
from chatsite.runs.validation import InvalidInput, clean_sampling
from inference.types import SAMPLING_DEFAULTS
from tests.factories import PoolFactory
from workers.generation import engine_request

pytestmark = pytest.mark.django_db
KNOBS = list(SAMPLING_DEFAULTS)
# Pools of their own names: PoolFactory gets or creates by name, and the live stack's
# "flagship" may exist already with other defaults.


def sampled(pool, **given):
    s = clean_sampling(pool, **given)
    return {name: getattr(s, name) for name in KNOBS}


def test_a_pool_without_defaults_gets_the_table():
    assert sampled(PoolFactory(name="no-defaults", default_sampling={})) == dict(SAMPLING_DEFAULTS)


def test_a_pools_defaults_cover_every_knob_and_the_client_overrides_each():
    mine = {"temperature": 0.3, "top_p": 0.4, "top_k": 40, "min_p": 0.05, "frequency_penalty": 0.2,
            "presence_penalty": 0.1, "repetition_penalty": 1.1}
    pool = PoolFactory(name="all-defaults", default_sampling=mine)
    assert sampled(pool) == mine
    theirs = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "frequency_penalty": 0.0,
              "presence_penalty": 0.0, "repetition_penalty": 1.0}
    assert sampled(pool, **theirs) == theirs


def test_a_bad_pool_default_is_named_as_the_knob():
    with pytest.raises(InvalidInput) as refused:
        clean_sampling(PoolFactory(name="bad-default", default_sampling={"repetition_penalty": 0}))
    assert refused.value.field == "repetition_penalty"


def test_the_engine_request_of_a_run_saved_without_a_knob_gets_the_table():
    run = GenerationRun(pk=1, seed=3, tier="interactive", sampling={})
    req = engine_request(run, request_id="r", prompt_token_ids=[1], max_tokens=2)
    assert {name: getattr(req, name) for name in KNOBS} == dict(SAMPLING_DEFAULTS)
