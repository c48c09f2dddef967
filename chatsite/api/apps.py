from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "chatsite.api"
    label = "api"
