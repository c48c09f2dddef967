from django.contrib.auth import views as auth_views
from django.urls import path

from chatsite.web import views

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(template_name="web/login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
]
