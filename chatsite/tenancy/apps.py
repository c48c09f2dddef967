from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "chatsite.tenancy"
    label = "tenancy"
