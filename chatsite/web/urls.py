from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.views import serve as serve_static
from django.urls import path, re_path
from django.views.decorators.cache import cache_control

from chatsite.web import live_views, views
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
    path("events", live_views.user_events, name="user-events"),
    path("healthz", views.healthz, name="healthz"),
    # daphne serves no static files of its own; the UI's few small assets come
    # from the finders here (a CDN or whitenoise in front would cache them better).
    re_path(r"^static/(?P<path>.+)$", cache_control(max_age=300)(serve_static), {"insecure": True}),
]
