from django.apps import AppConfig


class OpenAIApiConfig(AppConfig):
    name = "chatsite.openai_api"
    label = "openai_api"
