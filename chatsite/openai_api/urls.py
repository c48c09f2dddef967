from django.urls import path

from chatsite.openai_api.completions import views
from chatsite.openai_api.responses import views as responses_views

urlpatterns = [
    path("chat/completions", views.chat_completions, name="openai-chat-completions"),
    path("completions", views.text_completions, name="openai-completions"),
    path("models", views.models_list, name="openai-models"),
    path("models/<str:model>", views.model_detail, name="openai-model"),
    path("responses", responses_views.responses, name="openai-responses"),
    path("responses/<str:response_id>", responses_views.response_detail, name="openai-response"),
    path("responses/<str:response_id>/cancel", responses_views.response_cancel, name="openai-response-cancel"),
    path("responses/<str:response_id>/input_items", responses_views.response_input_items,
         name="openai-response-input-items"),
]
