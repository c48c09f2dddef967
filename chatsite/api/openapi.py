"""OpenAPI documentation helpers: documented error responses, the bearer-key
security scheme, and the endpoints that are not DRF views (the SSE consumer and
the OpenAI-compatible async views), added to the schema by a preprocessing hook."""
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from drf_spectacular.utils import OpenApiResponse

from chatsite.api.serializers import ErrorResponse

ERROR_TEXT = {
    400: "Invalid request: malformed or non-UTF-8 JSON, NaN/Infinity, or a field out of range "
         "(`error.field` names it).",
    401: "No credentials, or an invalid or revoked API key.",
    404: "No such object for you: missing, another user's, or another tenant's (all look the same).",
    405: "Method not allowed on this URL.",
    409: "Conflict: e.g. a reply is still being generated in this chat.",
    413: "The request body is larger than the limit (256 KiB by default).",
    415: "The body is not JSON (send Content-Type: application/json).",
    429: "The tenant's budget, concurrency or rate limit is reached; retry after `Retry-After` seconds.",
    500: "A bug on our side; it is logged.",
    503: "The model is overloaded (shedding load), or the service is briefly unavailable (Postgres or Redis "
         "restarting; nothing was saved); retry after `Retry-After` seconds.",
}
READ_ERRORS = (401, 404, 503)
WRITE_ERRORS = (400, 401, 404, 413, 415, 503)


def errors(*statuses: int, rules: str = "") -> dict:
    """Documented error responses, all in the one error shape. `rules`: the 400s a request
    the schema allows may still get, since they depend on the data (an unknown model, a
    message of another role), each naming its field in backticks."""
    text = {s: ERROR_TEXT[s] for s in statuses}
    if rules:
        text[400] += " Also, however well formed the request: " + rules
    return {s: OpenApiResponse(ErrorResponse, description=text[s]) for s in statuses}


class BearerKeyScheme(OpenApiAuthenticationExtension):
    target_class = "chatsite.runs.admission.credentials.ApiKeyAuthentication"
    name = "bearerKey"

    def get_security_definition(self, auto_schema):
        scheme = build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Bearer")
        scheme["description"] = ("An API key: `Authorization: Bearer csk_…`. Create one with POST /api/keys/ "
                                 "(shown once) or `manage.py create_api_key`.")
        return scheme


def add_documented_endpoints(endpoints, **kwargs):
    """drf-spectacular preprocessing hook: document the endpoints that are not DRF
    views. Their documentation-only views are never routed; the real handlers are
    chatsite.runs.events_app.run_events and chatsite.openai_api.completions.views."""
    from chatsite.api.docs_views import RunEventsDocs
    from chatsite.openai_api.completions.docs import ChatCompletionsDocs, ModelDetailDocs, ModelListDocs
    from chatsite.openai_api.completions.docs import TextCompletionsDocs
    from chatsite.openai_api.responses.docs import (ResponseCancelDocs, ResponseDetailDocs, ResponseInputItemsDocs,
                                                    ResponsesDocs)

    extra = [
        ("/api/runs/{run_id}/events", "api/runs/<int:run_id>/events", "GET", RunEventsDocs.as_view()),
        ("/v1/chat/completions", "v1/chat/completions", "POST", ChatCompletionsDocs.as_view()),
        ("/v1/completions", "v1/completions", "POST", TextCompletionsDocs.as_view()),
        ("/v1/models", "v1/models", "GET", ModelListDocs.as_view()),
        ("/v1/models/{model}", "v1/models/<str:model>", "GET", ModelDetailDocs.as_view()),
        ("/v1/responses", "v1/responses", "POST", ResponsesDocs.as_view()),
        ("/v1/responses/{response_id}", "v1/responses/<str:response_id>", "GET", ResponseDetailDocs.as_view()),
        ("/v1/responses/{response_id}", "v1/responses/<str:response_id>", "DELETE", ResponseDetailDocs.as_view()),
        ("/v1/responses/{response_id}/cancel", "v1/responses/<str:response_id>/cancel", "POST",
         ResponseCancelDocs.as_view()),
        ("/v1/responses/{response_id}/input_items", "v1/responses/<str:response_id>/input_items", "GET",
         ResponseInputItemsDocs.as_view()),
    ]
    return list(endpoints) + extra
