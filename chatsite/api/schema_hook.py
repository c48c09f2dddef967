"""The schema's preprocessing hook (settings.SPECTACULAR_SETTINGS): the endpoints that are
not DRF views (the SSE consumer, the OpenAI-compatible async views) join the schema
through their documentation-only views."""
from chatsite.api.docs_views import RunEventsDocs
from chatsite.openai_api.completions.docs import (ChatCompletionsDocs, ModelDetailDocs, ModelListDocs,
                                                  TextCompletionsDocs)
from chatsite.openai_api.responses.docs import (ResponseCancelDocs, ResponseDetailDocs, ResponseInputItemsDocs,
                                                ResponsesDocs)


def add_documented_endpoints(endpoints, **kwargs):
    """drf-spectacular preprocessing hook: document the endpoints that are not DRF
    views. Their documentation-only views are never routed; the real handlers are
    chatsite.runs.events_app.run_events and chatsite.openai_api.completions.views."""
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
