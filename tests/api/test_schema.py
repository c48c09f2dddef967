"""The OpenAPI schema documents every endpoint, field and error; the docs page
runs from the installed Swagger UI, not a CDN."""
import re

import pytest
import yaml
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = pytest.mark.django_db

CONSUMER_PATHS = {"/api/runs/{run_id}/events"}  # routed in chatsite/edge/asgi.py, not in the URLconf
NOT_IN_SCHEMA = {"/api/schema/", "/api/docs/"}


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    with django_db_blocker.unblock():
        resp = Client().get("/api/schema/")
    assert resp.status_code == 200
    return yaml.safe_load(resp.content)


def _routes(patterns, prefix=""):
    for p in patterns:
        route = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            yield from _routes(p.url_patterns, route)
        elif isinstance(p, URLPattern):
            yield "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def test_every_api_and_openai_route_is_in_the_schema(schema):
    routes = {r for r in _routes(get_resolver().url_patterns) if r.startswith(("/api/", "/v1/"))}
    assert routes - NOT_IN_SCHEMA | CONSUMER_PATHS == set(schema["paths"])


PUBLIC = {"/api/shared/{token}"}  # a share link's read (chatsite.chats.sharing)


def test_every_operation_is_described_and_documents_its_errors(schema):
    for path, item in schema["paths"].items():
        for method, op in item.items():
            where = f"{method.upper()} {path}"
            assert op.get("summary") and op.get("tags"), where
            codes = set(op["responses"])
            assert any(c.startswith("2") for c in codes), where
            if path in PUBLIC:  # the link is the credential: no account, so no 401
                assert "401" not in codes and not any(op.get("security") or []), where
            else:
                assert "401" in codes, where  # every other endpoint needs credentials
            if path != "/v1/models":
                assert "404" in codes or path in ("/api/chats/", "/api/chats/search/", "/api/keys/", "/api/models/",
                                                 "/api/usage/"), where
            if "requestBody" in op:
                assert {"400", "413"} <= codes, where
            shape = "OpenAIErrorResponse" if path.startswith("/v1/") else "ErrorResponse"
            for code, resp in op["responses"].items():
                if code[0] in "45":
                    ref = resp["content"]["application/json"]["schema"]["$ref"]
                    assert ref.endswith("/" + shape), (where, code)


def _undocumented(name, schema_obj):
    for field, prop in (schema_obj.get("properties") or {}).items():
        if "$ref" in prop or prop.get("allOf") or prop.get("items", {}).get("$ref"):
            continue  # a nested object: documented as its own component
        if not (prop.get("description") or prop.get("enum") or prop.get("readOnly") and field == "id"):
            yield f"{name}.{field}"


def test_every_field_is_documented(schema):
    components = schema["components"]["schemas"]
    missing = [m for name, obj in components.items() for m in _undocumented(name, obj)]
    assert missing == []


def test_sse_endpoint_documents_its_events_and_last_event_id(schema):
    op = schema["paths"]["/api/runs/{run_id}/events"]["get"]
    for word in ("token", "done", "error", "snapshot", "Last-Event-ID", "invalid_last_event_id", "keep-alive"):
        assert word in op["description"], word
    assert {p["name"] for p in op["parameters"]} >= {"run_id", "Last-Event-ID", "last_event_id"}
    assert "text/event-stream" in op["responses"]["200"]["content"]
    assert {"400", "401", "404"} <= set(op["responses"])


def test_bearer_keys_are_the_documented_security(schema):
    schemes = schema["components"]["securitySchemes"]
    assert schemes["bearerKey"]["scheme"] == "bearer"
    assert schema["paths"]["/v1/chat/completions"]["post"]["security"] == [{"bearerKey": []}]


def test_docs_page_uses_the_installed_swagger_ui(db):
    html = Client().get("/api/docs/").content.decode()
    assert "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower() and "https://" not in html
