from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "chatsite.quotas"
    label = "quotas"
