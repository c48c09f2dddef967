"""The OpenAPI schema (/api/schema/) and the API agree, both ways, checked by Schemathesis
against the live server and fake-engine workers (issue 44 item 14):

- positive: a request the schema allows is not refused with a 4xx for a reason the schema
  does not state. Allowed: 404 (an id that is not yours), 409 (a chat busy with a reply),
  429, and a 400 the operation's 400 description names as a rule of the data (an unknown
  model, a message of the wrong role, a date that is not in the calendar);
- negative: a request the schema forbids is refused with a 4xx;
- and never a 5xx.

Bounded: a fixed seed, deterministic generation, the coverage phase (each bound, pattern,
type and required field of the schema, both ways: ~1,100 requests) and a few positive
examples per operation (~120). Positive
requests name the tenant's models, chat and messages where the schema asks for one, so
they reach past "not found"; negative ones go as generated. To hunt further, set
CHATSITE_CONTRACT_SEED and CHATSITE_CONTRACT_EXAMPLES."""
import os
import zlib

import pytest
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from chatsite.pools.models import ModelPool
from tests.factories import ChatFactory, PoolFactory, TenantFactory, UserFactory

MAX_EXAMPLES = int(os.environ.get("CHATSITE_CONTRACT_EXAMPLES", "4"))
SEED = int(os.environ.get("CHATSITE_CONTRACT_SEED", "20261205"))
pytestmark = pytest.mark.django_db  # the tests write nothing themselves: the live server does
POOLS = ("flagship", "small")
V1_BODIES = ["openai_chat_completions", "openai_completions", "openai_responses_create"]
MAX_OUTPUT_TOKENS = 16  # short replies: a chat is free again soon
# Refusals that depend on the data, not on the request's shape; each operation's 400
# description in the schema names its fields (test_every_data_rule_is_stated holds it).
DATA_RULES = {
    "chats_create": {"model", "max_tokens", "message.model", "message.max_tokens", "message.content", "stream"},
    "chats_update": {"model", "max_tokens"},
    "chats_list": {"before"},
    "messages_create": {"model", "max_tokens", "content", "queue"},
    "messages_edit": {"model", "max_tokens", "content", "message"},
    "messages_regenerate": {"model", "max_tokens", "message"},
    "messages_continue": {"max_tokens", "message"},
    "messages_list": {"after", "before"},
    "runs_feedback_give": {"run"},
    "openai_responses_retrieve": {"starting_after"},
    "openai_responses_input_items": {"after"},
}


@pytest.fixture(scope="module")
def tenant_rows(live_url, fake_workers, django_db_blocker):
    """A tenant with a user, a key and a chat with one finished turn; the rows stay for the module."""
    from chatsite.runs.admission import run_submit
    from chatsite.tenancy.services import api_key_create

    with django_db_blocker.unblock():
        tenant = TenantFactory(name="Contract", slug="contract")
        user = UserFactory(tenant=tenant)
        pools = [PoolFactory(name=name) for name in POOLS]
        kept = {p.pk: p.max_output_tokens for p in pools}
        ModelPool.objects.filter(pk__in=kept).update(max_output_tokens=MAX_OUTPUT_TOKENS)
        chat = ChatFactory(tenant=tenant, owner=user, pool=pools[0])
        run = run_submit(chat=chat, content="hello", max_tokens=4)
        _, secret = api_key_create(user=user, tenant=tenant, name="contract")
    yield {"secret": secret, "chat": chat.pk, "messages": [run.user_message_id, run.assistant_message_id],
           "run": run.pk}
    with django_db_blocker.unblock():
        tenant.delete()
        user.delete()
        for pk, tokens in kept.items():
            ModelPool.objects.filter(pk=pk).update(max_output_tokens=tokens)


@pytest.fixture(scope="module")
def api_schema(live_url, tenant_rows):
    schema = schemathesis.openapi.from_url(f"{live_url}/api/schema/")
    schema.config.update(base_url=live_url)
    schema.config.seed = SEED
    schema.config.generation.update(max_examples=MAX_EXAMPLES, deterministic=True, database="none",
                                    modes=["positive", "negative"], unique_inputs=True, no_shrink=True)
    schema.config.checks.positive_data_acceptance.expected_statuses = ["2xx", "404", "409", "429"]
    schema.config.phases.coverage.unexpected_methods = set()  # 405s are test_fuzz's (status_code_conformance)
    # Negative data from the coverage phase (each field's wrong type, bound, pattern and absence, in order):
    # building the fuzzing phase's negative strategies was most of the test's own CPU.
    schema.config.phases.fuzzing.generation.update(modes=["positive"])
    return schema


schema = schemathesis.pytest.from_fixture("api_schema")


def _error_field(response) -> str | None:
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return None
    return error.get("field") or error.get("param")


def positive_unless_a_data_rule(ctx, response, case):
    """positive_data_acceptance, except for a 400 naming a field of the operation's DATA_RULES."""
    if response.status_code == 400 and _error_field(response) in DATA_RULES.get(case.operation.definition.raw.get(
            "operationId"), ()):
        return None
    return positive_data_acceptance(ctx, response, case)


CHECKS = [not_a_server_error, positive_unless_a_data_rule, negative_data_rejection]


def _with_real_ids(case, rows) -> None:
    """A request reaches the tenant's own rows where it names one by a well-formed id (its
    chat, messages, run), and a positive one names the tenant's models."""
    params = case.path_parameters or {}
    for name, value in (("chat_id", rows["chat"]), ("run_id", rows["run"]),
                        ("message_id", rows["messages"][zlib.crc32(repr(case.body).encode()) % 2])):
        if isinstance(params.get(name), int):
            params[name] = value
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return
    body = case.body if isinstance(case.body, dict) else {}
    if body.get("stream") is True:  # the answer would wait for the reply; its contract is false's
        body["stream"] = False
    for part in (body, body.get("message") if isinstance(body.get("message"), dict) else {}):
        if isinstance(part.get("model"), str):
            part["model"] = POOLS[len(part["model"]) % 2]


# Not here: revoking keys (test_fuzz keeps its key alive), and the bodies of /v1's POSTs, OpenAI's and vLLM's
# wire formats, whose optional fields take null as "the default" where the schema types them without it.
@schema.exclude(operation_id=["keys_revoke", *V1_BODIES]).parametrize()
def test_the_api_does_what_its_schema_says(case, tenant_rows):
    _with_real_ids(case, tenant_rows)
    response = case.call(headers={"Authorization": f"Bearer {tenant_rows['secret']}"}, timeout=30)
    case.validate_response(response, checks=CHECKS)


def test_every_data_rule_is_stated(api_schema):
    """Each refusal the positive check lets pass is one the operation's 400 says in words."""
    described = {op.definition.raw["operationId"]: op.definition.raw["responses"].get("400", {}).get("description", "")
                 for op in (result.ok() for result in api_schema.get_all_operations())}
    for operation_id, fields in DATA_RULES.items():
        for field in fields:
            assert f"`{field}`" in described[operation_id], (operation_id, field)

