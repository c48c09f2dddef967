from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from chatsite.api import views_account, views_chats, views_runs

# GET /api/runs/{id}/events is the Channels consumer routed in chatsite/asgi.py.
urlpatterns = [
    path("chats/", views_chats.ChatListView.as_view()),
    path("chats/<int:chat_id>/", views_chats.ChatDetailView.as_view()),
    path("chats/<int:chat_id>/messages/", views_chats.MessageListView.as_view()),
    path("runs/<int:run_id>/", views_runs.RunDetailView.as_view()),
    path("runs/<int:run_id>/cancel", views_runs.RunCancelView.as_view()),
    path("models/", views_runs.ModelListView.as_view()),
    path("keys/", views_account.ApiKeyListView.as_view()),
    path("keys/<int:key_id>/", views_account.ApiKeyDetailView.as_view()),
    path("usage/", views_account.UsageView.as_view()),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]
