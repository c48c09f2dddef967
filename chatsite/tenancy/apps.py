from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "chatsite.tenancy"
    label = "tenancy"

    def ready(self):
        from chatsite.tenancy import throttle  # noqa: F401  (connects the failed-login counter)
