from django.contrib import admin

from chatsite.chats.models import Chat, Message


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    fields = ["role", "content", "token_count", "parent", "replaced_by", "created_at"]
    readonly_fields = ["parent", "replaced_by", "created_at"]


@admin.register(Chat)
class ChatAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "tenant", "owner", "pool", "listed", "updated_at"]
    list_filter = ["tenant", "pool", "listed"]
    search_fields = ["title", "owner__username"]
    raw_id_fields = ["owner", "current_leaf"]
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["id", "chat", "parent", "role", "token_count", "created_at"]
    list_filter = ["role", "chat__tenant"]
    search_fields = ["content"]
    raw_id_fields = ["chat", "parent", "replaced_by"]
