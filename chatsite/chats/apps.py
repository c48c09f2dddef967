from django.apps import AppConfig


class ChatsConfig(AppConfig):
    name = "chatsite.chats"
    label = "chats"
