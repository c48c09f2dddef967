from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "chatsite.api"
    label = "api"

    def ready(self):
        from chatsite.api import openapi  # noqa: F401  (registers the bearer-key security scheme)
