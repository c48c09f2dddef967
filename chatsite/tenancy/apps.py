from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "chatsite.tenancy"
    label = "tenancy"

    def ready(self):
        from chatsite.tenancy import receivers, throttle  # noqa: F401  (connect the revocation and login receivers)
