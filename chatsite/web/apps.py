from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "chatsite.web"
    label = "web"
