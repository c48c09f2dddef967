from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from chatsite.api import views_account, views_chats, views_feedback, views_messages, views_queue, views_runs, views_shares
from chatsite.api.async_path import on_the_loop

MESSAGE = "chats/<int:chat_id>/messages/<int:message_id>/"

# GET /api/runs/{id}/events is the Channels consumer routed in chatsite/edge/asgi.py.
urlpatterns = [
    # The views that admit runs take the async admission path (chatsite.api.async_path).
    path("chats/", on_the_loop(views_chats.ChatListView)),
    path("chats/search/", views_chats.ChatSearchView.as_view()),
    path("chats/<int:chat_id>/", views_chats.ChatDetailView.as_view()),
    path("chats/<int:chat_id>/export.md", views_chats.ChatExportMarkdownView.as_view()),
    path("chats/<int:chat_id>/export.json", views_chats.ChatExportJsonView.as_view()),
    path("chats/<int:chat_id>/messages/", on_the_loop(views_messages.MessageListView)),
    path(MESSAGE + "regenerate", on_the_loop(views_messages.RegenerateView)),
    path(MESSAGE + "edit", on_the_loop(views_messages.EditView)),
    path(MESSAGE + "continue", on_the_loop(views_messages.ContinueView)),
    path(MESSAGE + "select", views_messages.SelectView.as_view()),
    path("chats/<int:chat_id>/queue/", views_queue.QueueListView.as_view()),
    path("chats/<int:chat_id>/queue/<int:queued_id>/", views_queue.QueuedDetailView.as_view()),
    path("chats/<int:chat_id>/queue/<int:queued_id>/send-now", on_the_loop(views_queue.QueuedSendNowView)),
    path("chats/<int:chat_id>/queue/<int:queued_id>/retry", views_queue.QueuedRetryView.as_view()),
    path("chats/<int:chat_id>/shares/", views_shares.ShareListView.as_view()),
    path("chats/<int:chat_id>/shares/<int:share_id>/", views_shares.ShareDetailView.as_view()),
    path("shared/<str:token>", views_shares.SharedChatView.as_view()),
    path("runs/<int:run_id>/", views_runs.RunDetailView.as_view()),
    path("runs/<int:run_id>/cancel", views_runs.RunCancelView.as_view()),
    path("runs/<int:run_id>/feedback", views_feedback.FeedbackView.as_view()),
    path("models/", views_runs.ModelListView.as_view()),
    path("keys/", views_account.ApiKeyListView.as_view()),
    path("keys/<int:key_id>/", views_account.ApiKeyDetailView.as_view()),
    path("usage/", views_account.UsageView.as_view()),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]
