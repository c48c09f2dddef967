from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "chatsite.runs"
    label = "runs"
