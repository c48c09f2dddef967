from django.urls import path

from chatsite.openai_api import views

urlpatterns = [
    path("chat/completions", views.chat_completions, name="openai-chat-completions"),
    path("completions", views.text_completions, name="openai-completions"),
    path("models", views.models_list, name="openai-models"),
    path("models/<str:model>", views.model_detail, name="openai-model"),
]
