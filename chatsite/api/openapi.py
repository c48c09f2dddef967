"""OpenAPI documentation helpers: documented error responses and the bearer-key
security scheme (the endpoints that are not DRF views join the schema through
chatsite.api.schema_hook)."""
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

