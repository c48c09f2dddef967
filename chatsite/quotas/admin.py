from django.contrib import admin

from chatsite.quotas.models import TenantQuota, TenantUsage


@admin.register(TenantQuota)
class TenantQuotaAdmin(admin.ModelAdmin):
    list_display = ["tenant", "token_budget", "period", "max_concurrent_runs", "requests_per_minute"]
    list_editable = ["token_budget", "period", "max_concurrent_runs", "requests_per_minute"]
    search_fields = ["tenant__name"]


@admin.register(TenantUsage)
class TenantUsageAdmin(admin.ModelAdmin):
    list_display = ["tenant", "period_start", "used_tokens", "reserved_tokens", "refused_requests"]
    list_filter = ["tenant"]
    readonly_fields = ["tenant", "period_start", "used_tokens", "reserved_tokens", "refused_requests"]
