from django.contrib.auth import views as auth_views
from django.urls import path, re_path

from chatsite.web import live_views, settings_page, shared_views, static_files, views
from chatsite.web.csp import with_csp
from chatsite.web.forms import LoginForm

login_view = with_csp(auth_views.LoginView.as_view(template_name="web/login.html", authentication_form=LoginForm,
                                                   redirect_authenticated_user=True))

urlpatterns = [
    path("login/", login_view, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.home, name="home"),
    path("c/<int:chat_id>/", views.chat_page, name="chat"),
    path("c/<int:chat_id>/rename", views.chat_rename, name="chat-rename"),
    path("c/<int:chat_id>/delete", views.chat_remove, name="chat-delete"),
    path("settings/", settings_page.settings_page, name="settings"),
    path("s/<str:token>", shared_views.shared_page, name="shared"),
    path("events", live_views.user_events, name="user-events"),
    path("healthz", views.healthz, name="healthz"),
    # daphne serves no static files of its own: whitenoise does, compressed and cached.
    re_path(r"^static/.", static_files.serve),
]
