from django.contrib import admin

from chatsite.chats.models import Chat, Message


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    fields = ["role", "content", "token_count", "created_at"]
    readonly_fields = ["created_at"]


@admin.register(Chat)
class ChatAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "tenant", "owner", "pool", "updated_at"]
    list_filter = ["tenant", "pool"]
    search_fields = ["title", "owner__username"]
    raw_id_fields = ["owner"]
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["id", "chat", "role", "token_count", "created_at"]
    list_filter = ["role", "chat__tenant"]
    search_fields = ["content"]
    raw_id_fields = ["chat"]
