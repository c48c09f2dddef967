"""Fuzz the API from its own OpenAPI schema (/api/schema/) with Schemathesis,
against the live server and fake-engine workers, with an API key.

Bounded and repeatable: 12 examples per operation, a fixed seed, deterministic
generation; positive and negative data. Checks: no 5xx, responses and their
status codes and content types as documented. To hunt further, run it with
CHATSITE_FUZZ_SEED and CHATSITE_FUZZ_EXAMPLES set (e.g. 7 and 200).

The SSE endpoint is fuzzed twice: with the rest (run ids as generated, nearly
all unknown), and on its own against real runs (finished in Redis, finished
with the stream expired, another tenant's), with fuzzed Last-Event-ID headers
and tokens, a third of the cases with the run's real token and no API key, a
third with the fuzzed token alone: every
answer must be a whole 2xx or 4xx within the timeout, never a 5xx or a hang."""
import os
import itertools
import re

import pytest
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from chatsite.pools.models import ModelPool
from chatsite.chats.models import Chat
from chatsite.runs.stream import codec
from chatsite.runs.access import events_token
from tests.factories import ChatFactory, PoolFactory, TenantFactory, UserFactory
from tests.security.helpers import open_run

MAX_EXAMPLES = int(os.environ.get("CHATSITE_FUZZ_EXAMPLES", "12"))
SEED = int(os.environ.get("CHATSITE_FUZZ_SEED", "20261130"))
# The mark makes pytest-django set up the test database; the tests themselves write nothing.
pytestmark = pytest.mark.django_db
FUZZ_MAX_OUTPUT_TOKENS = 24
CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance]


@pytest.fixture(scope="module")
def fuzz_key(live_url, fake_workers, django_db_blocker):
    """A tenant with a user, a chat and a key of its own; the rows stay for the whole module."""
    from chatsite.tenancy.services import api_key_create

    with django_db_blocker.unblock():
        tenant = TenantFactory(name="Fuzz", slug="fuzz")
        user = UserFactory(tenant=tenant)
        pools = [PoolFactory(name="flagship"), PoolFactory(name="small")]
        # Short replies keep the runs the fuzzer starts (up to max_output_tokens each) quick.
        ModelPool.objects.filter(pk__in=[p.pk for p in pools]).update(max_output_tokens=FUZZ_MAX_OUTPUT_TOKENS)
        ChatFactory(tenant=tenant, owner=user, pool=pools[0])
        key, secret = api_key_create(user=user, tenant=tenant, name="fuzz")
    yield key.pk, secret
    with django_db_blocker.unblock():
        tenant.delete()
        user.delete()
        for pool in pools:
            ModelPool.objects.filter(pk=pool.pk).update(max_output_tokens=pool.max_output_tokens)


@pytest.fixture(scope="module")
def api_schema(live_url, fuzz_key, sse_runs):
    # sse_runs is made here, while the schema loads: Schemathesis resolves a test's own
    # fixtures inside the test's transaction, where the live server would not see its rows.
    schema = schemathesis.openapi.from_url(f"{live_url}/api/schema/")
    schema.config.update(base_url=live_url)
    schema.config.seed = SEED
    schema.config.generation.update(max_examples=MAX_EXAMPLES, deterministic=True, database="none",
                                    modes=["positive", "negative"])
    return schema


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.slow
@schema.parametrize()
def test_api_conforms_to_its_schema(case, fuzz_key):
    key_id, secret = fuzz_key
    if (case.path_parameters or {}).get("key_id") == key_id:
        case.path_parameters["key_id"] = key_id + 10**6  # never revoke the key the fuzzer runs on
    response = case.call(headers={"Authorization": f"Bearer {secret}"}, timeout=60)  # loaded box: a whole run
    case.validate_response(response, checks=CHECKS)


@pytest.fixture(scope="module")
def sse_runs(live_url, fuzz_key, django_db_blocker):
    """Runs of the fuzz tenant (one finished with its stream in Redis, one whose stream
    expired) and another tenant's, each with a real events token."""
    from chatsite import redis_keys
    from chatsite.redis_client import get_redis
    from tests.runs.helpers import post_message, wait_terminal

    _, secret = fuzz_key
    auth = {"Authorization": f"Bearer {secret}"}
    with django_db_blocker.unblock():
        first = Chat.objects.filter(tenant__slug="fuzz").order_by("id").first()  # the fixture's, or a fuzzed one
        chat = ChatFactory(tenant=first.tenant, owner=first.owner, pool=PoolFactory(name="flagship"))
        runs = []
        for _ in range(2):  # one at a time: a chat takes a new message once its reply is done
            runs.append(post_message(live_url, auth, chat.pk, max_tokens=8))
            wait_terminal(runs[-1]["id"])
        get_redis().delete(redis_keys.run_stream(runs[1]["id"]))  # served from Postgres as a snapshot
        other = ChatFactory(pool=PoolFactory(name="flagship"))
        other_run = open_run(other)
        get_redis().xadd(redis_keys.run_stream(other_run.pk), codec.done_fields(
            finish_reason="stop", prompt_tokens=1, completion_tokens=1))
        other_token = events_token(other_run)
    yield [(r["id"], r["events_url"].partition("?token=")[2]) for r in runs] + [(other_run.pk, other_token)]
    with django_db_blocker.unblock():
        other.tenant.delete()
        other.owner.delete()


_sse_cases = itertools.count()


@schema.include(operation_id="runs_events").parametrize()
def test_run_events_answer_every_input_whole_and_clean(case, fuzz_key, sse_runs):
    _, secret = fuzz_key
    n = next(_sse_cases)  # cases come in a fixed order: every run, with and without its token, in turn
    run_id, token = sse_runs[n % len(sse_runs)]
    if re.fullmatch(r"-?\d+", str((case.path_parameters or {}).get("run_id"))):  # a well-formed id: a real run
        case.path_parameters["run_id"] = run_id
    mode = (n // len(sse_runs)) % 3  # the API key and the fuzzed token; the run's own token alone; the fuzzed alone
    headers = {"Authorization": f"Bearer {secret}"} if mode == 0 else {}
    if mode == 1:
        case.query = {**(case.query if isinstance(case.query, dict) else {}), "token": token}
    response = case.call(headers=headers, timeout=30)  # a stream that never ended would time out here
    case.validate_response(response, checks=CHECKS)
    assert response.status_code < 500, response.text[:300]
