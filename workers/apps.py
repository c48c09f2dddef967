from django.apps import AppConfig


class WorkersConfig(AppConfig):
    """Registered so that the engine-side management commands live beside the engine glue."""

    name = "workers"
    label = "workers"
