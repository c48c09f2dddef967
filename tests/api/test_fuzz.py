"""Fuzz the API from its own OpenAPI schema (/api/schema/) with Schemathesis,
against the live server and fake-engine workers, with an API key.

Bounded and repeatable: 25 examples per operation, a fixed seed, deterministic
generation; positive and negative data. Checks: no 5xx, responses and their
status codes and content types as documented. To hunt further, run it with
CHATSITE_FUZZ_SEED and CHATSITE_FUZZ_EXAMPLES set (e.g. 7 and 200)."""
import os

import pytest
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from chatsite.pools.models import ModelPool
from tests.factories import ChatFactory, PoolFactory, TenantFactory, UserFactory

MAX_EXAMPLES = int(os.environ.get("CHATSITE_FUZZ_EXAMPLES", "25"))
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
def api_schema(live_url, fuzz_key):
    schema = schemathesis.openapi.from_url(f"{live_url}/api/schema/")
    schema.config.update(base_url=live_url)
    schema.config.seed = SEED
    schema.config.generation.update(max_examples=MAX_EXAMPLES, deterministic=True, database="none",
                                    modes=["positive", "negative"])
    return schema


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
def test_api_conforms_to_its_schema(case, fuzz_key):
    key_id, secret = fuzz_key
    if (case.path_parameters or {}).get("key_id") == key_id:
        case.path_parameters["key_id"] = key_id + 10**6  # never revoke the key the fuzzer runs on
    response = case.call(headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    case.validate_response(response, checks=CHECKS)
