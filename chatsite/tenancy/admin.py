from django.contrib import admin

from chatsite.tenancy.models import ApiKey, Membership, Tenant
from chatsite.tenancy.services import api_key_revoke


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["name", "slug"]
    filter_horizontal = ["allowed_pools"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = ["tenant", "role"]
    search_fields = ["user__username", "tenant__name"]


@admin.action(description="Revoke the selected keys")
def revoke_keys(modeladmin, request, queryset):
    for key in queryset:
        api_key_revoke(key=key)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "prefix", "user", "tenant", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["tenant", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix", "user__username"]
    readonly_fields = ["prefix", "secret_hash", "created_at", "last_used_at", "revoked_at"]
    actions = [revoke_keys]

    def has_add_permission(self, request):
        return False  # keys are made by `manage.py create_api_key` or their owner, shown once
