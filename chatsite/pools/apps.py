from django.apps import AppConfig


class PoolsConfig(AppConfig):
    name = "chatsite.pools"
    label = "pools"
